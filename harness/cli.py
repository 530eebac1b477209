"""The `tapt-bench` command line. Each command's flags are generated from its settings dataclass."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.errors import SettingsError, UserError
from harness.settings import Settings, field_names, from_namespace, key_table, option
from harness.spec import TASKS_DIR


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults after each flag's help; epilogs (tables of config keys) kept as written."""


@dataclass(kw_only=True)
class RunOptions(Settings):
    """How `tapt-bench run` executes a grid config (what it computes is in the config)."""

    config: str = option(help="grid config YAML, or a shipped config's name (demo, zero_shot, ...)")
    shard: str = option("0/1", "run the i-th of N deterministic slices of the units, as i/N")
    keep_adapters: bool = option(False, "keep each unit's adapters beside its results")
    overwrite: bool = option(False, "delete finished units made with other settings and recompute them")
    no_summary: bool = option(False, "skip the summary table at the end")
    workers: int = option(1, "processes on this machine, each a shard of this run's units (a small model leaves a GPU idle)")
    ray: bool = option(False, "run the units as Ray tasks (needs the extra: pip install -e '.[ray]'); the driver "
                              "writes every result; --keep-adapters writes adapters on the workers' disks")
    address: str | None = option(None, "with --ray: the cluster to join (e.g. auto); default: a local Ray instance")
    cpus_per_unit: float = option(1.0, "with --ray: CPUs per unit (also its torch threads)")
    gpus_per_unit: float = option(0.0, "with --ray: GPUs per unit (a fraction shares one GPU among units)")

    MINIMUM = {"workers": 1, "cpus_per_unit": 0.0, "gpus_per_unit": 0.0}

    def check(self) -> None:
        super().check()
        self.shard_pair()
        ray_only = [flag for flag, value, default in (("--address", self.address, None),
                                                     ("--cpus-per-unit", self.cpus_per_unit, 1.0),
                                                     ("--gpus-per-unit", self.gpus_per_unit, 0.0)) if value != default]
        if ray_only and not self.ray:
            raise SettingsError(f"{', '.join(ray_only)}: used only with --ray; add --ray or drop them")
        if self.ray and self.workers > 1:
            raise SettingsError("--workers and --ray are two ways to run units side by side; use one")

    def shard_pair(self) -> tuple[int, int]:
        try:
            i, count = (int(x) for x in self.shard.split("/"))
        except ValueError:
            raise SettingsError(f"--shard must look like i/N (e.g. 0/4), got {self.shard!r}") from None
        if not 0 <= i < count:
            raise SettingsError(f"--shard {self.shard}: need 0 <= i < N")
        return i, count


def cmd_models_prepare(args: argparse.Namespace) -> None:
    from harness import models

    for name in args.names or list(models.PACKAGES):
        print(f"{name}\t{models.prepare(name)}")


def cmd_tasks_list(args: argparse.Namespace) -> None:
    from harness.data import LOCAL_FILES, resolve_data_dir
    from harness.spec import TASKS_DIR, load_task_config, spec_from_config, task_files
    from harness.subsample import DataSettings

    source = from_namespace(DataSettings, args)
    root = resolve_data_dir(source.data_dir)
    print(f"{'task':38} {'classes':>7}  {'offline':7}  {'hub id':34} file")
    for slug, path in sorted(task_files(source.include_path).items()):
        spec = spec_from_config(load_task_config(path), str(path))
        offline = "-" if root is None else ("yes" if any((root / slug / f).is_file() for f in LOCAL_FILES) else "no")
        where = path.name if path.parent == TASKS_DIR else str(path)
        print(f"{spec.task_name:38} {len(spec.classes):>7}  {offline:7}  {spec.hub_id:34} {where}")


def cmd_tasks_path(args: argparse.Namespace) -> None:
    from harness.spec import TASKS_DIR

    print(TASKS_DIR)


def cmd_tasks_show(args: argparse.Namespace) -> None:
    from harness.splits import SplitSettings
    from harness.settings import pick
    from harness.spec import task_path
    from harness.validate import build_task, render_first

    chosen = from_namespace(SplitSettings, args)
    meta = {k: v for k, v in pick(chosen, SplitSettings).items() if k != "task"}
    shown = render_first(build_task(task_path(chosen.task, chosen.include_path), meta, chosen.include_path))
    print(shown["prompt"])
    print("\n--- choices (each scored as a continuation of the prompt):")
    for c in shown["choices"]:
        print(f"{shown['delimiter'] + c!r}" + ("   <- target" if c == shown["target"] else ""))


def cmd_tasks_validate(args: argparse.Namespace) -> None:
    from harness.subsample import SampleSettings
    from harness.validate import problems

    from harness.spec import validation_targets

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


def cmd_train(args: argparse.Namespace) -> None:
    from harness.models import resolve
    from tapt.adapter import AdapterArgs, train_adapter

    train = from_namespace(AdapterArgs, args)
    train.base = resolve(train.base)
    rec = train_adapter(train)
    print(f"adapter: {train.out}  sequences {rec['sequences']}  tokens {rec['tokens']}  steps {rec['steps']}  "
          f"loss {rec['losses'][0]:.4f} -> {rec['final_loss']:.4f}  {rec['seconds_per_step']:.2f} s/step")
    print("evaluate it on the test split of the same subsample with:\n  " + lm_eval_command(train))


def lm_eval_command(train) -> str:
    """The lm_eval command that scores an adapter on its subsample's test split (lm-eval needs the
    base as `pretrained=`, the adapter as `peft=`, and the task's folder as --include_path)."""
    import shlex

    from harness.data import resolve_data_dir
    from harness.spec import load_task_config, task_path

    yaml = task_path(train.task, train.include_path).resolve()
    data_dir = resolve_data_dir(train.data_dir)
    meta = {"data_dir": str(data_dir.resolve()) if data_dir else None, "m": train.m, "n": train.n,
            "seed": train.seed, "subsample": train.subsample, "split": "test"}
    model_args = f"pretrained={train.base},peft={Path(train.out).resolve()}"
    return shlex.join(["lm_eval", "--model", "hf", "--model_args", model_args, "--include_path", str(yaml.parent),
                       "--tasks", load_task_config(yaml)["task"], "--metadata", json.dumps(meta)])


def cmd_pretrain_text(args: argparse.Namespace) -> None:
    from harness.models import resolve
    from tapt.raw_text import TextArgs, pretrain_text

    train = from_namespace(TextArgs, args)
    train.base = resolve(train.base)
    rec = pretrain_text(train)
    print(f"model: {train.out}  objective {rec['objective']}  epochs {rec['epochs']}  sequences {rec['sequences']}  "
          f"loss {rec['losses'][0]:.4f} -> {rec['final_loss']:.4f}  {rec['seconds_per_step']:.2f} s/step")


def cmd_run(args: argparse.Namespace) -> None:
    from harness import grid
    from harness.summary import collect, format_changes, format_tables, prediction_changes, summarize

    opts = from_namespace(RunOptions, args)
    overrides = {k: getattr(args, k) for k in field_names(grid.GridConfig) if hasattr(args, k)}
    cfg = grid.load_config(opts.config, overrides)
    shard = opts.shard_pair()
    if opts.workers > 1:
        run_workers(args.argv, cfg, shard, opts.workers, opts.overwrite)
    else:
        execute = None
        if opts.ray:
            from harness.ray_grid import executor

            execute = executor(opts.address, opts.cpus_per_unit, opts.gpus_per_unit)
        for cell in cfg.cell_configs():
            grid.run(cell, shard, opts.keep_adapters, opts.overwrite, execute)
    if shard[1] == 1 and not opts.no_summary:
        for cell in cfg.cell_configs():
            print(format_tables(summarize(collect(grid.model_dir(cell)))))
            print(format_changes(prediction_changes(grid.model_dir(cell))) + "\n")


def run_workers(argv: list[str], cfg, shard: tuple[int, int], workers: int, overwrite: bool) -> None:
    """`workers` processes on this machine, each a shard of this run's units, writing the same layout;
    then the tables are rebuilt once from every finished unit (each worker rebuilt them for its own)."""
    import subprocess

    from harness import grid, results

    for cell in cfg.cell_configs():  # once, here, rather than racing in every worker
        grid.check_settings(cell, overwrite)
    i, count = shard
    command = [sys.executable, "-m", "harness.cli", *argv]  # repeated flags: the last one counts
    procs = [subprocess.Popen([*command, "--workers", "1", "--no-summary", "--shard", f"{i + j * count}/{count * workers}"])
             for j in range(workers)]
    failed = [j for j, proc in enumerate(procs) if proc.wait() != 0]
    for cell in cfg.cell_configs():
        for slug in cell.slugs:
            tdir = results.task_dir(Path(cell.out), cell.m, cell.n, cell.tag, slug)
            if (tdir / "units").is_dir():
                results.rebuild(tdir)
    if failed:
        raise UserError(f"worker(s) {failed} of {workers} failed (their output is above); rerun the same command "
                        "to finish their units: finished units are kept")


def cmd_merge(args: argparse.Namespace) -> None:
    from harness.results import merge

    for tdir in merge([Path(s) for s in args.sources], Path(args.out)):
        print(f"merged {tdir}")


def cmd_summarize(args: argparse.Namespace) -> None:
    from harness.summary import collect, format_tables, summarize

    summary = summarize(collect(args.results), seed=args.seed)
    print(json.dumps(summary) if args.json else format_tables(summary))


def cmd_analyze(args: argparse.Namespace) -> None:
    """`analyze RESULTS` fits every selected cell and effect; `analyze meta RESULTS` runs the meta-analysis."""
    from harness.summary import collect

    if args.what[0] == "meta":
        return analyze_meta(args)
    if len(args.what) != 1:
        raise UserError(f"analyze takes one results dir (or `meta RESULTS`), got {args.what}")
    from harness import analysis, plots

    s = from_namespace(analysis.AnalysisSettings, args)
    source = args.what[0]
    df = collect(source)
    fits, checks = [], []
    for m, n, rows in analysis.cells_of(df, s, source):
        for effect in analysis.effects_of(s):
            d = analysis.cell_data(rows, effect, f"{source} m={m} n={n}")
            if not s.json:
                print(f"fitting m={m} n={n} {effect}: {d.shape}", file=sys.stderr, flush=True)
            fit = analysis.fit_cell(d, s)
            fits.append(fit)
            label = f"m{m}_n{n}_{effect}"
            if s.plots:
                plots.diagnostics(fit["idata"], label, Path(s.plots))
            if s.checks:
                checks.append(model_checks(d, fit, s, label))
    if s.plots:
        title = Path(source).name
        plots.average_differences(fits, title, Path(s.plots) / "eq11_average_difference.png")
        plots.task_differences(fits, title, Path(s.plots) / "eq12_tasks.png")
    records = [f["record"] for f in fits]
    if s.json:
        print(json.dumps({"results": source, "fits": records, "checks": checks}))
        return
    print(analysis.format_fits(records))
    for c in checks:
        print(analysis.format_checks(c))
    if s.plots:
        print(f"plots: {s.plots}")


def model_checks(d, fit: dict, s, label: str) -> dict:
    """Prior predictive, calibration and recovery for one fitted cell (plots when asked)."""
    from harness import analysis, plots

    prior = analysis.prior_predictive(d, s)
    calib = analysis.calibration(fit["predicted"], d, s)
    recovered = analysis.recovery(d, s, fit["idata"])
    if s.plots:
        plots.prior_predictive(prior["accuracies"], label, Path(s.plots) / f"prior_predictive_{label}.png")
        plots.calibration(calib, label, Path(s.plots) / f"calibration_{label}.png")
    inside = ((calib["hdi_low"] <= calib["observed"]) & (calib["observed"] <= calib["hdi_high"])).mean()
    return {"m": d.m, "n": d.n, "effect": d.effect,
            "prior_predictive": {k: v for k, v in prior.items() if k != "accuracies"},
            "calibration": {"cells": len(calib), "share_inside_hdi": float(inside),
                            "max_abs_error": float((calib["predicted"] - calib["observed"]).abs().max())},
            "recovery": recovered}


def analyze_meta(args: argparse.Namespace) -> None:
    from harness import analysis, plots
    from harness.meta import MetaSettings, lm_type_agreement, meta_analysis
    from harness.summary import collect

    if len(args.what) != 2:
        raise UserError(f"usage: tapt-bench analyze meta RESULTS --m M --n N [--slices S], got {args.what[1:]}")
    s = from_namespace(MetaSettings, args)
    s.check_meta()
    source = args.what[1]
    df = collect(source)
    ((m, n, rows),) = analysis.cells_of(df, s, source)
    for effect in analysis.effects_of(s):
        result = meta_analysis(rows, s, effect, progress=not s.json)
        agreement = lm_type_agreement(df, effect, s.permutations, s.seed)
        if s.plots:
            plots.meta_cdf(result, f"{Path(source).name} m={m} n={n} {effect}",
                           Path(s.plots) / f"meta_cdf_m{m}_n{n}_{effect}.png")
        if s.json:
            print(json.dumps({"results": source, "meta": result, "lm_type_agreement": agreement}))
            continue
        q = result["quantiles"]
        print(f"{source} m={m} n={n} {effect}: {s.slices} slices (one subsample per task), "
              f"{s.chains} chains x {s.draws} draws each; {result['seconds']:.0f} s "
              f"(compile {result['compile_seconds']:.0f} s)")
        print(f"  posterior mean of beta per slice: 5% {q['0.05']:+.3f}  25% {q['0.25']:+.3f}  median "
              f"{q['0.5']:+.3f}  75% {q['0.75']:+.3f}  95% {q['0.95']:+.3f}")
        print(f"  share outside (-{s.rope}, {s.rope}): {100 * result['share_outside']:.1f}%")
        if result["divergences"]:
            print(f"  warning: {result['divergences']} divergent transitions in {result['slices_with_divergences']} of "
                  f"{s.slices} slices at target acceptance {s.target_accept}; refit with --target-accept "
                  f"{analysis.refit_target_accept(s.target_accept)}")
        if agreement:
            a = agreement
            print(f"  {a['lm_types'][0]} vs {a['lm_types'][1]} subsample-level {effect}, Spearman per (m, n, task), "
                  f"{a['groups']} groups (all cells): mean rho {a['mean_rho']:+.3f} ({100 * a['share_positive']:.0f}% "
                  f"positive); random pairings {a['null_mean_rho']:+.3f} +- {a['null_sd']:.3f}; p = {a['p_value']:.4f}")


def cmd_simulate_pca(args: argparse.Namespace) -> None:
    from harness.pca_simulation import PcaSettings, format_rows, plot, simulate

    s = from_namespace(PcaSettings, args)
    rows = simulate(s)
    if s.plot:
        plot(rows, s, s.plot)
    print(json.dumps({"settings": {k: v for k, v in vars(s).items() if k not in ("json", "plot")}, "ranks": rows})
          if s.json else format_rows(rows, s))


def cmd_contamination_test(args: argparse.Namespace) -> None:
    from contamination.sharded_test import ContaminationArgs, run
    from harness.models import resolve

    test = from_namespace(ContaminationArgs, args)
    test.base = resolve(test.base)
    result = run(test)
    if test.out:
        from harness.results import atomic_write

        atomic_write(Path(test.out), json.dumps(result, indent=1).encode())
    print(f"pval {result['pval']:.6g}  t {result['t']:.4f}  shards {result['num_shards']}  "
          f"permutations {result['permutations_per_shard']}  {result['seconds']:.1f} s")


def cmd_contamination_pvalue(args: argparse.Namespace) -> None:
    from contamination.stat import pvalue_from_log

    try:
        log = json.loads(Path(args.log).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{args.log}: not a JSON test log ({type(err).__name__}: {err}); pass the .json file "
                        "written by `contamination test --out` or a study log") from err
    if not isinstance(log, dict):
        raise UserError(f"{args.log}: a test log is a JSON object, got {type(log).__name__}")
    pval = pvalue_from_log(log, args.log)
    print(json.dumps({"pval": pval}) if args.json else f"pval {pval:.10g}")


def parser() -> argparse.ArgumentParser:
    from transformers import HfArgumentParser

    from contamination.sharded_test import ContaminationArgs
    from harness.splits import SplitSettings
    from harness.grid import GridConfig
    from harness.subsample import DataSettings, SampleSettings
    from tapt.adapter import AdapterArgs
    from tapt.raw_text import TextArgs

    top = argparse.ArgumentParser(prog="tapt-bench", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True, parser_class=HfArgumentParser)

    def command(group, name: str, func, help: str, *settings: type, epilog: str | None = None):
        p = group.add_parser(name, dataclass_types=list(settings), help=help, description=help, epilog=epilog,
                             formatter_class=HelpFormatter)
        p.set_defaults(func=func)
        return p

    models = sub.add_parser("models", help="embedded default models").add_subparsers(dest="action", required=True)
    p = command(models, "prepare", cmd_models_prepare, "materialise the default models as HF model dirs and print their paths")
    p.add_argument("names", nargs="*", help="default: all")

    tasks = sub.add_parser("tasks", help="the task YAMLs").add_subparsers(dest="action", required=True)
    command(tasks, "list", cmd_tasks_list, "the tasks, their classes and whether data is offline", DataSettings)
    command(tasks, "path", cmd_tasks_path, "print the folder of the shipped task YAMLs (for lm_eval --include_path)")
    command(tasks, "show", cmd_tasks_show, "render one real prompt with its choices and target", SplitSettings)
    p = command(tasks, "validate", cmd_tasks_validate, "check task YAML(s) end to end and explain every problem",
                SampleSettings)
    p.add_argument("path", nargs="?", default=str(TASKS_DIR), help="a task YAML or a folder of them")

    command(sub, "train", cmd_train, "TAPT: train a (Q)LoRA adapter on a subsample split's unlabeled prompts",
            AdapterArgs)
    command(sub, "pretrain-text", cmd_pretrain_text, "classifier TAPT: MLM (encoder) or CLM (decoder) on raw texts",
            TextArgs)
    p = command(sub, "run", cmd_run, "run an experiment grid (resumable; shardable)", RunOptions, GridConfig,
                epilog="config keys and their defaults; each is also a flag, which overrides the file's value\n"
                       "(input paths in the file resolve against its folder, `out` against the current one):\n"
                       + key_table(GridConfig))
    for action in p._actions:  # a config key's flag counts only when given; else the file's value stays
        if action.dest in field_names(GridConfig):
            action.default = argparse.SUPPRESS

    p = command(sub, "merge", cmd_merge, "combine the finished units of shard outputs and rebuild the tables")
    p.add_argument("sources", nargs="+", help="output dirs of the shards")
    p.add_argument("--out", required=True)

    p = command(sub, "summarize", cmd_summarize, "boost, bias, per-task permutation tests with BH adjustment")
    p.add_argument("results", help="a results dir in the layout m<m>/n<n>/<model>/<task>/accuracies.csv")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.add_argument("--seed", type=int, default=0, help="seed of the permutation tests")

    from harness.meta import MetaSettings

    p = command(sub, "analyze", cmd_analyze, "the hierarchical Bayesian model per (m, n) cell and effect; "
                "`analyze meta RESULTS --m M --n N` for the meta-analysis of single-subsample slices", MetaSettings)
    p.add_argument("what", nargs="+", metavar="[meta] RESULTS", help="a results dir in the layout "
                   "m<m>/n<n>/<model>/<task>/accuracies.csv; `meta RESULTS` for the meta-analysis")

    from harness.pca_simulation import PcaSettings

    simulate = sub.add_parser("simulate", help="simulations").add_subparsers(dest="action", required=True)
    command(simulate, "pca", cmd_simulate_pca, "PCA fitted on test features vs on extra features: the R^2 bias by "
            "effective rank (a setting where pretraining on test does bias the score)", PcaSettings)

    cont = sub.add_parser("contamination", help="the sharded exchangeability test (Oren et al. 2024)")
    cont = cont.add_subparsers(dest="action", required=True)
    command(cont, "test", cmd_contamination_test, "run the test on a task split for a model, optionally with an adapter",
            ContaminationArgs)
    p = command(cont, "pvalue", cmd_contamination_pvalue, "recompute the p-value of a test log")
    p.add_argument("log")
    p.add_argument("--json", action="store_true")
    return top


def main(argv: list[str] | None = None) -> None:
    # bitsandbytes logs at import, on CPUs with AVX512-BF16, that an optional hub kernel is missing: a speed
    # hint for 4-bit CPU training that this offline tool cannot act on, and it would open every command's output
    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)
    args = parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args.func(args)
    except (UserError, FileNotFoundError) as err:
        sys.exit(f"tapt-bench: error: {err}")
    except BrokenPipeError:  # the reader of our output (e.g. `| head`) stopped early: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    main()
