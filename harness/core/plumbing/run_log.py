"""A run's log file, and the terminal's output sent to it: a full disk that refuses a line is said once on
the terminal, and the terminal comes back whatever happens (a grid run uses both)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path


class RunLog(logging.FileHandler):
    """The run's log file; a line it cannot write (a full disk) is said once on the terminal, not as
    logging's traceback per line."""

    failed = False

    def handleError(self, record: logging.LogRecord | None = None) -> None:
        if not self.failed:
            self.failed = True
            error = sys.exc_info()[1]
            print(
                f"note: cannot write the run's log {self.baseFilename} ({error}); it stops here",
                file=sys.stderr,
            )

    def flush(self) -> None:
        try:
            super().flush()
        except OSError:
            self.handleError()

    def close(self) -> None:
        try:
            super().close()
        except OSError:
            self.handleError()


@contextlib.contextmanager
def output_to(path: Path):
    """Send what the libraries print (the Trainer's step dicts, their progress bars, warnings) to the
    run's log file, at the file-descriptor level; yields the terminal for the grid's own progress bar."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    terminal = os.fdopen(os.dup(2), "w")
    logfile = open(path, "a", buffering=1)  # noqa: SIM115 (closed below, where a full disk may refuse it)
    with (
        contextlib.redirect_stdout(logfile),
        contextlib.redirect_stderr(logfile),
    ):  # Python-level writers too (a replaced sys.stdout, say)
        os.dup2(logfile.fileno(), 1)
        os.dup2(logfile.fileno(), 2)
        try:
            yield terminal
        finally:
            with contextlib.suppress(OSError):  # a full disk: the log is cut, and the terminal comes back
                sys.stdout.flush()
                sys.stderr.flush()
            for fd, copy in zip((1, 2), saved):
                os.dup2(copy, fd)
                os.close(copy)
            terminal.close()
            with contextlib.suppress(OSError):
                logfile.close()
