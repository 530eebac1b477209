"""`tapt-bench models ...` and `tapt-bench tasks ...`: the embedded models and the task YAMLs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli.parsing import command
from harness.core.plumbing.settings import from_namespace, pick
from harness.tasks.spec import TASKS_DIR


def cmd_models_prepare(args: argparse.Namespace) -> None:
    from harness.core.engine import models

    for name in args.names or list(models.PACKAGES):
        print(f"{name}\t{models.prepare(name)}")


def cmd_tasks_list(args: argparse.Namespace) -> None:
    from harness.core.plumbing.errors import UserError
    from harness.tasks.data import LOCAL_FILES, resolve_data_dir
    from harness.tasks.spec import load_task_config, spec_from_config, task_files
    from harness.tasks.subsample import DataSettings

    source = from_namespace(DataSettings, args)
    root = resolve_data_dir(source.data_dir)
    if root is not None and not root.is_dir():
        raise UserError(
            f"--data-dir {root} (or $TAPT_BENCH_DATA_DIR): no such folder; name the folder that holds "
            "<slug>/data.parquet files"
        )
    print(f"{'task':38} {'classes':>7}  {'offline':7}  {'hub id':34} file")
    for slug, path in sorted(task_files(source.include_path).items()):
        spec = spec_from_config(load_task_config(path), str(path))
        offline = (
            "-"
            if root is None
            else ("yes" if any((root / slug / f).is_file() for f in LOCAL_FILES) else "no")
        )
        if spec.generator:  # built by the package: offline everywhere
            offline = "yes"
        where = path.name if path.parent == TASKS_DIR else str(path)
        classes = "gen" if spec.generative else str(len(spec.classes))
        source = spec.hub_id or f"(generator: {spec.generator})"
        print(f"{spec.task_name:38} {classes:>7}  {offline:7}  {source:34} {where}")


def cmd_tasks_path(args: argparse.Namespace) -> None:
    print(TASKS_DIR)


def cmd_tasks_show(args: argparse.Namespace) -> None:
    from harness.tasks.lm_eval_spec import LmEvalSpec
    from harness.tasks.protocol import SplitSettings, draw_rows, find_spec
    from harness.tasks.spec import task_path
    from harness.tasks.validate import build_task, render_first

    chosen = from_namespace(SplitSettings, args)
    spec = find_spec(chosen.task, chosen.include_path)
    # the one kind check left: a tapt_* task is shown as lm-eval builds it from its YAML
    # (harness.tasks.validate, a module above the spec's), which proves the YAML renders
    if isinstance(spec, LmEvalSpec):
        return show_lm_eval_task(spec, chosen)
    draw_rows(spec, chosen, chosen.subsample)  # a design the pool cannot hold: tapt-bench's own error
    metadata = {k: v for k, v in pick(chosen, SplitSettings).items() if k != "task"}
    shown = render_first(
        build_task(task_path(chosen.task, chosen.include_path), metadata, chosen.include_path)
    )
    print(shown["prompt"])
    if "choices" not in shown:  # a generative task: the model writes its answer
        print(f"\n--- generated as {shown['generation_kwargs']}, read by the filters {shown['filters']}")
        print(f"--- gold answer: {shown['target']!r} (exact match, per document)")
        return
    print("\n--- choices (each scored as a continuation of the prompt):")
    for c in shown["choices"]:
        print(f"{shown['delimiter'] + c!r}" + ("   <- target" if c == shown["target"] else ""))


def show_lm_eval_task(spec, chosen) -> None:
    """`tasks show` of a task that is not a tapt_* task: the design on lm-eval's own definition of it."""
    from harness.cli.train import lm_eval_command
    from harness.core.plumbing.errors import TaskError
    from harness.tasks.lm_eval_spec import answering_problems
    from harness.tasks.protocol import subsample_docs

    found = answering_problems(spec)  # as `tasks validate` and every run check it
    if found:
        raise TaskError(f"{'; '.join(found)} (`tapt-bench tasks validate` says the same)")
    docs = subsample_docs(spec, chosen, chosen.subsample)
    metrics = [m["metric"] for m in spec.task.config.metric_list or []]
    train = spec.training_pool()
    print(f"lm-eval task {spec.task_name} (results folder {spec.slug}): {len(spec.pool())} evaluation docs")
    if spec.generative:
        print(
            f"generative: the model writes its answer ({spec.task.config.generation_kwargs}); "
            "draws are uniform"
        )
        named = metrics or ["exact_match"]  # none named: lm-eval's default for generate_until
        said = "" if metrics else " (none named: lm-eval's default)"
        print(f"metrics: {named}{said}; the summary reads {named[0]}, per document, after the task's filters")
    else:
        print(
            "choices: "
            + (
                f"the same for every doc {list(spec.classes)}"
                if spec.classes
                else "per doc (draws are uniform)"
            )
        )
        print(
            f"metrics: {metrics}; the summary reads acc"
            + (", units also record acc_norm" if "acc_norm" in metrics else "")
        )
    print(
        f"training split: {len(train)} docs" if train is not None else "training split: none (train is empty)"
    )
    doc = docs[chosen.split].iloc[0]
    print(
        f"\n--- subsample {chosen.subsample}, {chosen.split} doc at row {doc['row']}, as lm-eval scores it:"
    )
    print(doc["prompt"])
    if spec.generative:
        print(f"\n--- gold answer: {doc['choices'][0]!r}")
    else:
        print("\n--- choices (each scored as a continuation of the prompt):")
        for i, c in enumerate(doc["choices"]):
            print(repr(spec.target_delimiter + c) + ("   <- target" if i == doc["label"] else ""))
    print(
        "\n--- this subsample's test docs through lm_eval:\n  " + lm_eval_command(chosen, "pretrained=BASE")
    )


def cmd_tasks_validate(args: argparse.Namespace) -> None:
    from harness.core.plumbing.errors import UserError
    from harness.tasks.spec import defined_twice, validation_targets
    from harness.tasks.subsample import SampleSettings
    from harness.tasks.validate import problems

    sample = from_namespace(SampleSettings, args)
    paths = validation_targets(Path(args.path))
    if not paths:
        raise UserError(
            f"{args.path}: no task YAML in it (a .yaml with a `task` key); name a task YAML or its folder"
        )
    twice = defined_twice(paths, sample.include_path)
    failed = 0
    for path in paths:
        found = []
        if path in twice:  # another file names its task
            name, others = twice[path]
            found.append(
                f"{path}: task {name} is defined in {', '.join(map(str, others))} too: lm-eval would read "
                "one and skip the others; rename its `task` (and `dataset_kwargs.slug`)"
            )
        found += problems(path, sample)
        failed += bool(found)
        print(f"{'FAIL' if found else 'ok  '} {path}")
        for problem in found:
            print("     - " + problem.replace("\n", "\n       "))
    print(f"{len(paths) - failed} ok, {failed} with problems")
    if failed:
        sys.exit(1)


NEW_TASK = """include: {template}
task: tapt_{slug}
dataset_kwargs:
  slug: {slug}                    # <data_dir>/{slug}/data.parquet (or .csv/.jsonl) offline
  hub_id: {hub}{slug}          # the Hugging Face dataset, used when no data dir is given
  hub_split: train
  text_field: text                # column(s) of the text; a list is joined with a new line
  label_field: label              # column of the label: 0..K-1 in the order of classes, or their names
  classes: &classes [{classes}]
  instruction: "{instruction}"
doc_to_choice: *classes
"""


def cmd_tasks_new(args: argparse.Namespace) -> None:
    from harness.core.plumbing.errors import TaskError
    from harness.results import folder_problem
    from harness.tasks.spec import TEMPLATE, check_slug, task_files
    from harness.tasks.validate import PLACEHOLDERS

    check_slug(args.slug, "tasks new")
    shipped = task_files(())
    if args.slug in shipped:
        raise TaskError(
            f"tasks new: {args.slug!r} is a shipped task ({shipped[args.slug]}); choose another slug, or "
            "copy that file to change it under a new slug"
        )
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise TaskError(
            f"tasks new: --out {args.out} exists and is not a folder; name a folder to write the YAML in"
        )
    path = Path(args.out) / f"tapt_{args.slug}.yaml"
    if path.exists():
        raise TaskError(f"{path} exists; choose another slug or --out, or edit that file")
    problem = folder_problem(path.parent)
    if problem:
        raise TaskError(f"tasks new: --out {args.out}: {problem}")
    path.parent.mkdir(parents=True, exist_ok=True)
    filled = {"classes": ", ".join(PLACEHOLDERS["classes"]), "instruction": PLACEHOLDERS["instruction"]}
    template = TASKS_DIR.resolve() / TEMPLATE
    path.write_text(NEW_TASK.format(template=template, slug=args.slug, hub=PLACEHOLDERS["hub_id"], **filled))
    print(f"wrote {path}: edit its dataset_kwargs, then `tapt-bench tasks validate {path}`")


def add_commands(sub) -> None:
    from harness.tasks.protocol import SplitSettings
    from harness.tasks.subsample import DataSettings, SampleSettings

    models = sub.add_parser(
        "models", help="the embedded default models", description="the embedded default models"
    ).add_subparsers(dest="action", required=True)
    p = command(
        models,
        "prepare",
        cmd_models_prepare,
        "materialise the default models as HF model dirs and print their paths",
    )
    p.add_argument("names", nargs="*", help="default: all")

    tasks = sub.add_parser(
        "tasks",
        help="the tasks: list, show, validate, or write a new one",
        description="the tasks: the 25 shipped tapt_* tasks, your own task YAMLs, and any lm-eval "
        "multiple-choice task",
    ).add_subparsers(dest="action", required=True)
    command(
        tasks, "list", cmd_tasks_list, "the tasks, their classes and whether data is offline", DataSettings
    )
    command(
        tasks,
        "path",
        cmd_tasks_path,
        "print the folder of the shipped task YAMLs (lm_eval finds them itself once tapt-bench is installed)",
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
    p = command(
        tasks, "new", cmd_tasks_new, "write a new tapt_<slug>.yaml to edit, including this install's template"
    )
    p.add_argument("slug", help="the task's slug: tapt_<slug> is its name, <slug> its data folder")
    p.add_argument("--out", default=".", help="the folder to write it in (default: here)")
