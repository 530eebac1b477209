"""The `tapt-bench` command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.spec import TASKS_DIR, TaskError


def cmd_models_prepare(args: argparse.Namespace) -> None:
    from harness import models

    for name in args.names or list(models.PACKAGES):
        print(f"{name}\t{models.prepare(name)}")


def cmd_tasks_list(args: argparse.Namespace) -> None:
    from harness.data import LOCAL_FILES, resolve_data_dir
    from harness.spec import all_slugs, load_spec

    root = resolve_data_dir(args.data_dir)
    print(f"{'task':38} {'classes':>7}  {'offline':7}  hub id")
    for slug in all_slugs():
        spec = load_spec(slug)
        offline = "-" if root is None else ("yes" if any((root / slug / f).is_file() for f in LOCAL_FILES) else "no")
        print(f"{spec.task_name:38} {len(spec.classes):>7}  {offline:7}  {spec.hub_id}")


def cmd_tasks_show(args: argparse.Namespace) -> None:
    from harness.spec import task_path
    from harness.validate import build_task, render_first

    meta = {"data_dir": args.data_dir, "subsample": args.subsample, "m": args.m, "n": args.n, "split": args.split}
    shown = render_first(build_task(task_path(args.task), meta))
    print(shown["prompt"])
    print("\n--- choices (each scored as a continuation of the prompt):")
    for c in shown["choices"]:
        print(f"{shown['delimiter'] + c!r}" + ("   <- target" if c == shown["target"] else ""))


def cmd_tasks_validate(args: argparse.Namespace) -> None:
    from harness.validate import problems

    target = Path(args.path)
    paths = sorted(target.glob("tapt_*.yaml")) if target.is_dir() else [target]
    paths = [p for p in paths if p.name != "tapt_all.yaml"]
    failed = 0
    for path in paths:
        found = problems(path, args.data_dir, args.m, args.n)
        failed += bool(found)
        print(f"{'FAIL' if found else 'ok  '} {path}")
        for problem in found:
            print("     - " + problem.replace("\n", "\n       "))
    print(f"{len(paths) - failed} ok, {failed} with problems")
    if failed:
        sys.exit(1)


def cmd_train(args: argparse.Namespace) -> None:
    from harness.models import resolve
    from tapt.adapter import AdapterArgs, train_adapter

    kw = {k: v for k, v in vars(args).items() if k in AdapterArgs.__dataclass_fields__}
    rec = train_adapter(AdapterArgs(**{**kw, "base": resolve(args.base), "out": Path(args.out)}))
    print(f"adapter: {args.out}  sequences {rec['sequences']}  tokens {rec['tokens']}  steps {rec['steps']}  "
          f"loss {rec['losses'][0]:.4f} -> {rec['final_loss']:.4f}  {rec['seconds_per_step']:.2f} s/step")


def cmd_pretrain_text(args: argparse.Namespace) -> None:
    from harness.models import resolve
    from tapt.textlm import TextArgs, pretrain_text

    kw = {k: v for k, v in vars(args).items() if k in TextArgs.__dataclass_fields__}
    rec = pretrain_text(TextArgs(**{**kw, "base": resolve(args.base), "out": Path(args.out)}))
    print(f"model: {args.out}  objective {rec['objective']}  epochs {rec['epochs']}  sequences {rec['sequences']}  "
          f"loss {rec['losses'][0]:.4f} -> {rec['final_loss']:.4f}  {rec['seconds_per_step']:.2f} s/step")


def cmd_run(args: argparse.Namespace) -> None:
    from harness import grid
    from harness.summary import collect, format_tables, summarize

    cfg = grid.load_config(args.config)
    shard = parse_shard(args.shard)
    grid.run(cfg, shard, args.keep_adapters)
    if shard[1] == 1 and not args.no_summary:
        print(format_tables(summarize(collect(grid.model_dir(cfg)))))


def parse_shard(text: str) -> tuple[int, int]:
    try:
        i, count = (int(x) for x in text.split("/"))
    except ValueError:
        raise TaskError(f"--shard must look like i/N (e.g. 0/4), got {text!r}") from None
    if not 0 <= i < count:
        raise TaskError(f"--shard {text}: need 0 <= i < N")
    return i, count


def cmd_merge(args: argparse.Namespace) -> None:
    from harness.results import merge

    for tdir in merge([Path(s) for s in args.sources], Path(args.out)):
        print(f"merged {tdir}")


def cmd_summarize(args: argparse.Namespace) -> None:
    from harness.summary import collect, format_tables, summarize

    summary = summarize(collect(args.results), seed=args.seed)
    print(json.dumps(summary) if args.json else format_tables(summary))


def cmd_contamination_test(args: argparse.Namespace) -> None:
    from contamination.run import ContaminationArgs, run
    from harness.models import resolve

    kw = {k: v for k, v in vars(args).items() if k in ContaminationArgs.__dataclass_fields__}
    result = run(ContaminationArgs(**{**kw, "pretrained": resolve(args.pretrained)}))
    if args.out:
        from harness.results import atomic_write

        atomic_write(Path(args.out), json.dumps(result, indent=1).encode())
    print(f"pval {result['pval']:.6g}  t {result['t']:.4f}  shards {result['num_shards']}  "
          f"permutations {result['permutations_per_shard']}  {result['seconds']:.1f} s")


def cmd_contamination_pvalue(args: argparse.Namespace) -> None:
    from contamination.stat import pvalue_from_log

    try:
        log = json.loads(Path(args.log).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise TaskError(f"{args.log}: cannot read a JSON log ({err})") from err
    pval = pvalue_from_log(log, args.log)
    print(json.dumps({"pval": pval}) if args.json else f"pval {pval:.10g}")


def add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", help="folder of <slug>/data.parquet|csv|jsonl (default: $TAPT_BENCH_DATA_DIR, else the hub)")
    p.add_argument("--m", type=int, default=100, help="labeled train size")
    p.add_argument("--n", type=int, default=100, help="extra and test size")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="tapt-bench", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True)

    models = sub.add_parser("models", help="embedded default models").add_subparsers(dest="action", required=True)
    p = models.add_parser("prepare", help="materialise the default models as HF model dirs and print their paths")
    p.add_argument("names", nargs="*", help="default: all")
    p.set_defaults(func=cmd_models_prepare)

    tasks = sub.add_parser("tasks", help="the task YAMLs").add_subparsers(dest="action", required=True)
    p = tasks.add_parser("list", help="the tasks, their classes and whether data is offline")
    p.add_argument("--data-dir")
    p.set_defaults(func=cmd_tasks_list)
    p = tasks.add_parser("show", help="render one real prompt with its choices and target")
    p.add_argument("task")
    add_data_args(p)
    p.add_argument("--subsample", type=int, default=0)
    p.add_argument("--split", default="test", choices=["train", "extra", "test"])
    p.set_defaults(func=cmd_tasks_show)
    p = tasks.add_parser("validate", help="check task YAML(s) end to end and explain every problem")
    p.add_argument("path", nargs="?", default=str(TASKS_DIR), help="a task YAML or a folder of them")
    add_data_args(p)
    p.set_defaults(func=cmd_tasks_validate)
    p = sub.add_parser("train", help="TAPT: train a (Q)LoRA adapter on a subsample split's unlabeled prompts")
    add_tapt_args(p)
    p.add_argument("--packing", action="store_true", help="instruction once, then 8 texts per sequence")
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--quantize", choices=["4bit", "none"], default="4bit")
    p.add_argument("--fallback-lora", action="store_true", help="train plain LoRA if 4-bit loading fails")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-length", type=int, help="default 256 (padding) or 2048 (packing)")
    p.add_argument("--lr", type=float, default=2e-4)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("pretrain-text", help="classifier TAPT: MLM (encoder) or CLM (decoder) on raw texts")
    add_tapt_args(p)
    p.add_argument("--epochs", type=float, help="default 2 (encoder) or 1 (decoder)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=5e-5)
    p.set_defaults(func=cmd_pretrain_text)

    p = sub.add_parser("run", help="run an experiment grid (resumable; shardable)")
    p.add_argument("--config", required=True, help="grid config YAML, e.g. configs/demo.yaml")
    p.add_argument("--shard", default="0/1", help="run the i-th of N deterministic slices of the units")
    p.add_argument("--keep-adapters", action="store_true", help="keep each unit's adapters beside its results")
    p.add_argument("--no-summary", action="store_true")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("merge", help="combine the finished units of shard outputs and rebuild the tables")
    p.add_argument("sources", nargs="+", help="output dirs of the shards")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_merge)

    p = sub.add_parser("summarize", help="boost, bias, per-task permutation tests with BH adjustment")
    p.add_argument("results", help="a results dir in the layout m<m>/n<n>/<model>/<task>/accuracies.csv")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.add_argument("--seed", type=int, default=0, help="seed of the permutation tests")
    p.set_defaults(func=cmd_summarize)

    cont = sub.add_parser("contamination", help="the sharded exchangeability test (Oren et al. 2024)")
    cont = cont.add_subparsers(dest="action", required=True)
    p = cont.add_parser("test", help="run the test on a task split for a model, optionally with an adapter")
    p.add_argument("--pretrained", required=True)
    p.add_argument("--peft", help="a PEFT adapter dir trained on --pretrained")
    p.add_argument("--task", required=True)
    p.add_argument("--split", default="test")
    p.add_argument("--subsample", type=int, default=0)
    add_data_args(p)
    p.add_argument("--shards", type=int, default=10)
    p.add_argument("--permutations", type=int, default=25)
    p.add_argument("--format", choices=["labeled", "text-only"], default="labeled")
    p.add_argument("--context-len", type=int, default=1024)
    p.add_argument("--stride", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--out", help="write the result JSON here")
    p.set_defaults(func=cmd_contamination_test)
    p = cont.add_parser("pvalue", help="recompute the p-value of a test log")
    p.add_argument("log")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_contamination_pvalue)
    return top


def add_tapt_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", required=True)
    p.add_argument("--split", required=True, help="extra or test")
    p.add_argument("--subsample", type=int, default=0)
    add_data_args(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--base", default="SmolLM2-135M-Instruct", help="hub id, model dir, or an embedded default's name")
    p.add_argument("--out", required=True)
    p.add_argument("--overwrite", action="store_true")


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        args.func(args)
    except (TaskError, FileNotFoundError) as err:
        sys.exit(f"tapt-bench: error: {err}")


if __name__ == "__main__":
    main()
