"""The `tapt-bench` command: the top-level parser over the command groups, and the error boundary."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from harness.core.plumbing.errors import UserError, storage_problem, tracebacks

ABOUT = (
    "Does task-adaptive pretraining on a test set's unlabeled text inflate the scores on it? And did a "
    "checkpoint see a test set's text, or its labels? Train and score adapters, run the experiment grid "
    "and its statistics, and check checkpoints for contamination."
)
EPILOG = "`tapt-bench COMMAND --help` shows what a command does and its options."


def parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command; `argv`, the command line it will read, names the method whose
    settings are `train`'s flags."""
    from harness.cli import analyze, contamination, methods, report, run, tasks, train
    from harness.core.plumbing.flags import FlagParser

    top = FlagParser(prog="tapt-bench", description=ABOUT, epilog=EPILOG)
    sub = top.add_subparsers(dest="command", required=True, parser_class=FlagParser)
    for group in (tasks, run, methods, analyze, contamination, report):
        group.add_commands(sub)
    train.add_commands(sub, train.method_named(argv))
    return top


def main(argv: list[str] | None = None) -> None:
    try:  # the imports too: a Ctrl-C while torch loads is as common as one mid-run
        _run(list(sys.argv[1:] if argv is None else argv))
    except UserError as err:
        sys.exit(f"tapt-bench: error: {err}")
    except KeyboardInterrupt:  # Ctrl-C: what finished was written atomically; say so in one line
        print(
            "\ntapt-bench: interrupted; everything that finished before it is kept (a grid's finished units, "
            "a finished adapter), nothing half-written is; the same command resumes",
            file=sys.stderr,
        )
        # what the interrupt cut mid-construction (a progress bar, say) complains as it is collected at
        # exit; that is noise after the one line
        sys.unraisablehook = lambda unraisable: None
        sys.exit(130)
    except BrokenPipeError:  # the reader of our output (e.g. `| head`) stopped early: not an error
        # (before OSError, of which it is one: caught there it was raised again as a traceback)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError as err:
        problem = storage_problem(err)
        if problem is None or tracebacks():
            raise
        # a write the tool did not make atomically (a log line, a library's cache): said in one line
        sys.exit(
            f"tapt-bench: error: {problem}; everything finished before it is kept: then run the same "
            "command again"
        )


def _run(argv: list[str]) -> None:
    # bitsandbytes logs at import, on CPUs with AVX512-BF16, that an optional hub kernel is missing: a speed
    # hint for 4-bit CPU training that this offline tool cannot act on, and it would open every
    # command's output
    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)
    from harness.cli.analyze import with_subcommand

    argv = with_subcommand(argv or ["--help"])  # no command: what each one does, as pip answers
    top = parser(argv)
    group = top.subcommands().get(argv[0]) if len(argv) == 1 else None
    if group is not None and group.subcommands():  # a command with actions, none named: what each does
        argv = [*argv, "--help"]
    args = top.parse_args(argv)
    args.argv = argv
    args.func(args)
