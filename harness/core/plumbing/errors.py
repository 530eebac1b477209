"""The errors a user can fix: every message names the file, key or field and how to fix it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


class UserError(ValueError):
    """Bad input (a setting, a file, a path); the CLI prints the message without a traceback."""


class TaskError(UserError):
    """A task YAML or its data is unusable; the message names the task and the fix."""


class UnknownTaskError(TaskError):
    """No task YAML of that name in the shipped or included folders (lm-eval may still know it)."""


class SettingsError(UserError):
    """A setting has the wrong type or range, or settings disagree with results already written.

    `key` names the setting when one is at fault, so each entry point can name it its own way
    (a config key, a CLI flag).
    """

    def __init__(self, message: str, key: str | None = None, problem: str | None = None):
        super().__init__(message)
        self.key, self.problem = key, problem

    @classmethod
    def of(cls, key: str, problem: str) -> SettingsError:
        """`KEY PROBLEM`, with the key and the problem kept apart for each entry point to name its way."""
        return cls(f"{key} {problem}", key, problem)

    def at(self, source: str) -> SettingsError:
        """This error named in `source` (a config file): by its key where one is at fault. One already named
        there is itself."""
        if str(self).startswith(f"{source}: "):
            return self
        where = f"key {self.key!r} {self.problem}" if self.key else str(self)
        return SettingsError(f"{source}: {where}", self.key, self.problem)


def read_json_object(path: str | Path, what: str, fix: str) -> dict[str, Any]:
    """A JSON file that must hold an object: a UserError naming it (`what`) and `fix` where it does not."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{what}: a folder, not a file; {fix}")
    if not path.exists():
        raise UserError(f"{what}: no such file; {fix}")
    try:
        value = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{what}: not valid JSON ({named(err)}); {fix}") from err
    if not isinstance(value, dict):
        raise UserError(f"{what}: a JSON object was expected, got {type(value).__name__}; {fix}")
    return value


def storage_problem(err: BaseException) -> str | None:
    """A write the disk refused (it is full) or the shell's file-size limit stopped (`ulimit -f`): what
    happened and its fix, in words a user acts on; None for any other error."""
    import errno

    at = f" writing {err.filename}" if isinstance(err, OSError) and err.filename else ""
    if isinstance(err, OSError) and err.errno == errno.ENOSPC:
        return f"the disk is full (No space left on device{at}): free the disk"
    if isinstance(err, OSError) and err.errno == errno.EFBIG:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        shown = "unlimited" if limit == resource.RLIM_INFINITY else f"{limit} bytes"
        return (
            f"a file grew past this shell's file-size limit (ulimit -f: {shown}){at}: raise it "
            "(ulimit -f unlimited)"
        )
    return None


def named(err: BaseException) -> str:
    """`Kind: message`, for a one-line error; where the message is empty (`raise TypeError`), the place
    that raised it instead, so the line still says something."""
    if str(err):
        return f"{type(err).__name__}: {err}"
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f", raised at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb else ""
    return f"{type(err).__name__} (no message{where})"


def tracebacks() -> bool:
    """Whether TAPT_BENCH_TRACEBACK asks for tracebacks: 1, true or yes (0, false, no or unset: one line)."""
    return os.environ.get("TAPT_BENCH_TRACEBACK", "").strip().lower() in ("1", "true", "yes")


def print_user_errors(program: str) -> None:
    """In a process whose own entry point is not ours (lm_eval), print an uncaught UserError as one line
    `PROGRAM: error: MESSAGE` instead of a traceback (TAPT_BENCH_TRACEBACK=1 shows it); every other
    exception goes to the hook that was there. Installed once however often it is called."""
    if getattr(sys.excepthook, "tapt_bench", False):
        return
    previous = sys.excepthook

    def hook(kind, error, traceback):
        if issubclass(kind, UserError) and not tracebacks():
            print(f"{program}: error: {error}", file=sys.stderr)
        else:
            previous(kind, error, traceback)

    hook.tapt_bench = True
    sys.excepthook = hook
