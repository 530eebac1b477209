"""`tapt-bench models ...` and `tapt-bench tasks ...`: the embedded models and the task YAMLs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli.parsing import command
from harness.core.settings import from_namespace, pick
from harness.tasks.spec import TASKS_DIR


def cmd_models_prepare(args: argparse.Namespace) -> None:
    from harness.core import models

    for name in args.names or list(models.PACKAGES):
        print(f"{name}\t{models.prepare(name)}")


def cmd_tasks_list(args: argparse.Namespace) -> None:
    from harness.tasks.data import LOCAL_FILES, resolve_data_dir
    from harness.tasks.spec import load_task_config, spec_from_config, task_files
    from harness.tasks.subsample import DataSettings

    source = from_namespace(DataSettings, args)
    root = resolve_data_dir(source.data_dir)
    print(f"{'task':38} {'classes':>7}  {'offline':7}  {'hub id':34} file")
    for slug, path in sorted(task_files(source.include_path).items()):
        spec = spec_from_config(load_task_config(path), str(path))
        offline = (
            "-"
            if root is None
            else ("yes" if any((root / slug / f).is_file() for f in LOCAL_FILES) else "no")
        )
        where = path.name if path.parent == TASKS_DIR else str(path)
        print(f"{spec.task_name:38} {len(spec.classes):>7}  {offline:7}  {spec.hub_id:34} {where}")


def cmd_tasks_path(args: argparse.Namespace) -> None:
    print(TASKS_DIR)


def cmd_tasks_show(args: argparse.Namespace) -> None:
    from harness.tasks.spec import task_path
    from harness.tasks.splits import SplitSettings
    from harness.tasks.validate import build_task, render_first

    chosen = from_namespace(SplitSettings, args)
    metadata = {k: v for k, v in pick(chosen, SplitSettings).items() if k != "task"}
    shown = render_first(
        build_task(task_path(chosen.task, chosen.include_path), metadata, chosen.include_path)
    )
    print(shown["prompt"])
    print("\n--- choices (each scored as a continuation of the prompt):")
    for c in shown["choices"]:
        print(f"{shown['delimiter'] + c!r}" + ("   <- target" if c == shown["target"] else ""))


def cmd_tasks_validate(args: argparse.Namespace) -> None:
    from harness.tasks.spec import validation_targets
    from harness.tasks.subsample import SampleSettings
    from harness.tasks.validate import problems

    sample = from_namespace(SampleSettings, args)
    paths = validation_targets(Path(args.path))
    failed = 0
    for path in paths:
        found = problems(path, sample)
        failed += bool(found)
        print(f"{'FAIL' if found else 'ok  '} {path}")
        for problem in found:
            print("     - " + problem.replace("\n", "\n       "))
    print(f"{len(paths) - failed} ok, {failed} with problems")
    if failed:
        sys.exit(1)


def register(sub) -> None:
    from harness.tasks.splits import SplitSettings
    from harness.tasks.subsample import DataSettings, SampleSettings

    models = sub.add_parser("models", help="embedded default models").add_subparsers(
        dest="action", required=True
    )
    p = command(
        models,
        "prepare",
        cmd_models_prepare,
        "materialise the default models as HF model dirs and print their paths",
    )
    p.add_argument("names", nargs="*", help="default: all")

    tasks = sub.add_parser("tasks", help="the task YAMLs").add_subparsers(dest="action", required=True)
    command(
        tasks, "list", cmd_tasks_list, "the tasks, their classes and whether data is offline", DataSettings
    )
    command(
        tasks,
        "path",
        cmd_tasks_path,
        "print the folder of the shipped task YAMLs (for lm_eval --include_path)",
    )
    command(
        tasks, "show", cmd_tasks_show, "render one real prompt with its choices and target", SplitSettings
    )
    p = command(
        tasks,
        "validate",
        cmd_tasks_validate,
        "check task YAML(s) end to end and explain every problem",
        SampleSettings,
    )
    p.add_argument("path", nargs="?", default=str(TASKS_DIR), help="a task YAML or a folder of them")
