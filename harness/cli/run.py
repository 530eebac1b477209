"""`tapt-bench run`, `merge` and `summarize`: a grid, its shards, and its summary tables."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from harness.cli.parsing import command, natural, positive, strict_json
from harness.core.errors import SettingsError
from harness.core.power import ALPHA, TARGET
from harness.core.settings import Settings, field_names, from_namespace, option


@dataclass(kw_only=True)
class RunOptions(Settings):
    """How `tapt-bench run` executes a grid config (what it computes is in the config)."""

    config: str = option(help="grid config YAML, or a shipped config's name (demo, zero_shot, ...)")
    shard: str = option("0/1", "run the i-th of N deterministic slices of the units, as i/N")
    keep_adapters: bool = option(False, "keep each unit's adapters beside its results")
    overwrite: bool = option(False, "delete finished units made with other settings and recompute them")
    summary: bool = option(True, "print the summary table at the end (--no-summary: skip it)")
    workers: str = option(
        "auto",
        "worker processes on this machine, each loading the base once for all its units; auto: on a GPU, "
        "the first unit runs alone and as many units as its measured memory allows then run side by side "
        "(at most half the cores), on a CPU one unit at a time in this process",
    )
    threads: int = option(
        0,
        "torch threads per process; 0: $OMP_NUM_THREADS if set, else the cores no other program is using "
        "when each unit starts (at least 1), so that a run shares a machine without collapsing",
    )
    ray: bool = option(
        False,
        "run the units as Ray tasks (needs the extra: pip install -e '.[ray]'); the driver "
        "writes every result; --keep-adapters writes adapters on the workers' disks",
    )
    address: str | None = option(
        None, "with --ray: the cluster to join (e.g. auto); default: a local Ray instance"
    )
    until_mde: float = option(
        0.0,
        "run in rounds, one subsample of every task per method a round, and stop each method once its "
        "pooled MDE is at most this many points (never on its p-value), or at the config's subsamples; "
        "0: every unit at once",
    )
    cpus_per_unit: float = option(1.0, "with --ray: CPUs per unit (also its torch threads)")
    gpus_per_unit: str = option(
        "0",
        "with --ray: GPUs per unit (a fraction shares one GPU among units); auto: the first unit takes a "
        "whole GPU, the rest the fraction its measured peak memory needs",
    )

    MINIMUM = {"threads": 0, "cpus_per_unit": 0.0, "until_mde": 0.0}
    RAY_ONLY = ("address", "cpus_per_unit", "gpus_per_unit")

    def check(self) -> None:
        super().check()
        self.shard_pair()
        self.worker_count()
        self.gpu_share()
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        ray_only = ["--" + k.replace("_", "-") for k in self.RAY_ONLY if getattr(self, k) != defaults[k]]
        if ray_only and not self.ray:
            raise SettingsError(f"{', '.join(ray_only)}: used only with --ray; add --ray or drop them")
        if self.ray and self.worker_count() not in (None, 1):
            raise SettingsError("--workers and --ray are two ways to run units side by side; use one")
        if self.until_mde and self.shard_pair()[1] > 1:
            raise SettingsError(
                "--until-mde reads the summary of every unit between rounds, so one run holds them all: drop "
                "--shard (--workers and --ray still run a round's units side by side)"
            )
        if self.ray and self.threads:
            raise SettingsError(
                "--threads is for runs on this machine; under --ray each unit's torch threads are its "
                "--cpus-per-unit: set that instead"
            )

    def worker_count(self) -> int | None:
        """The workers asked for; None: auto."""
        return None if self.workers == "auto" else whole(self.workers, "--workers")

    def gpu_share(self) -> float | None:
        """The GPUs a Ray unit asks for; None: auto."""
        if self.gpus_per_unit == "auto":
            return None
        try:
            share = float(self.gpus_per_unit)
        except ValueError:
            share = -1.0
        if not 0 <= share < float("inf"):
            raise SettingsError(f"--gpus-per-unit must be auto or a number >= 0, got {self.gpus_per_unit!r}")
        return share

    def shard_pair(self) -> tuple[int, int]:
        try:
            i, count = (int(x) for x in self.shard.split("/"))
        except ValueError:
            raise SettingsError(f"--shard must look like i/N (e.g. 0/4), got {self.shard!r}") from None
        if count < 1:
            raise SettingsError(f"--shard {self.shard}: N must be at least 1 (i/N: the i-th of N slices)")
        if not 0 <= i < count:
            raise SettingsError(
                f"--shard {self.shard}: i must be 0 to N - 1 (for N = {count}: "
                f"{', '.join(f'{k}/{count}' for k in range(min(count, 4)))}{', ...' if count > 4 else ''})"
            )
        return i, count


def whole(text: str, name: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise SettingsError(f"{name} must be auto or a whole number >= 1, got {text!r}")
    return int(text)


def grid_config(config_path: str, args: argparse.Namespace):
    """The grid config of a command that takes --config and every config key as a flag (given flags win)."""
    from harness.grid.configuration import config, run_checks

    overrides = {k: getattr(args, k) for k in field_names(config.GridConfig) if hasattr(args, k)}
    return run_checks.load_run(config_path, overrides)


CONFIG_KEYS = (
    "config keys: each flag here is also a key of the config file (--data-dir is data_dir); a flag given "
    "overrides the file, and the file overrides the default shown (input paths in a file resolve against "
    "its folder, out against the current one)"
)


def cmd_run(args: argparse.Namespace) -> None:
    from harness.grid.configuration import plan, resolve
    from harness.grid.execution import run
    from harness.study import rounds

    opts = from_namespace(RunOptions, args)
    shard = opts.shard_pair()
    cfg = rounds.prepared(grid_config(opts.config, args), opts.until_mde)
    with executor(opts) as execute:

        def run_one(one, upto: int | None = None) -> None:  # planned here: load_run checked the whole run
            run.run(
                plan.run_plan(one), shard, opts.keep_adapters, opts.overwrite, execute, opts.threads, upto
            )

        rounds.run_study(cfg, opts.until_mde, shard[1], run_one)
    if shard[1] == 1 and opts.summary:  # one summary of the run's models: its family as summarize reads it
        folders = [resolve.folder(one) for one in cfg.run_configs()]
        models = [(c.sample.m, c.sample.n, f.name) for c, f in zip(cfg.run_configs(), folders)]
        print_summary(Path(cfg.grid.out), models=models)


@contextlib.contextmanager
def executor(opts: RunOptions):
    """Where the units run: Ray tasks, worker processes on this machine (their pool lives as long as the
    command: every cell and round reuses its loaded bases), or one by one in this process (None)."""
    if opts.ray:
        from harness.grid.execution.on_ray import executor as on_ray

        yield on_ray(address=opts.address, cpus_per_unit=opts.cpus_per_unit, gpus_per_unit=opts.gpu_share())
        return
    import torch

    workers, gpus = opts.worker_count(), torch.cuda.device_count()
    if workers == 1 or (workers is None and not gpus):
        yield None
        return
    from harness.grid.execution.pool import Pool

    with Pool(workers, opts.threads, gpus) as pool:
        yield pool.execute


def print_summary(
    root: Path,
    seed: int = 0,
    target: float = TARGET,
    chosen: dict | None = None,
    tasks: list | None = None,
    models: list | None = None,
) -> None:
    """A results folder's summary as text: the tables, changed predictions, collapsed models, what each
    method recorded of itself, and the exposure test; `models` ((m, n, model) each): those alone, read
    together (a run's own, whose family its plan names)."""
    from harness.results import model_dir
    from harness.stats.summary import of_folder
    from harness.stats.summary_text import format_tables

    summary = of_folder(root, seed, target, chosen=chosen, tasks=tasks, models=models)
    print(format_tables(summary))
    for folder in [model_dir(root, m, n, tag) for m, n, tag in models] if models else [root]:
        print_details(folder, summary)


def print_details(root: Path, summary: dict) -> None:
    """A folder's changed predictions, collapsed models, what each method recorded and the exposure test."""
    from harness.results import exposure_tests
    from harness.stats.diagnostics import format_records, method_records
    from harness.stats.exposure_summary import exposure_shares, format_exposure
    from harness.stats.summary import one_class, prediction_changes
    from harness.stats.summary_text import format_changes, format_one_class

    changes = prediction_changes(root)
    parts = [
        "" if changes.empty else format_changes(changes),
        format_one_class(one_class(root)),
        format_records(method_records(root)),
        format_exposure(exposure_shares(exposure_tests(root)), summary),
    ]
    for part in parts:
        if part:
            print(part + "\n")


def cmd_pilot(args: argparse.Namespace) -> None:
    from harness.core.settings import field_names as names
    from harness.grid.configuration import config
    from harness.study.pilot import PilotOptions, run_pilot

    opts = from_namespace(PilotOptions, args)
    given = {k: getattr(args, k) for k in names(config.GridConfig) if hasattr(args, k)}
    cfg = grid_config(opts.config, args)
    run_opts = RunOptions(config=opts.config, workers=opts.workers, threads=opts.threads)
    with executor(run_opts) as execute:
        run_pilot(opts, cfg, given, execute, opts.threads)


def cmd_merge(args: argparse.Namespace) -> None:
    from harness.grid.execution.merge import merge

    for tdir in merge([Path(s) for s in args.sources], Path(args.out)):
        print(f"merged {tdir}")


def cmd_summarize(args: argparse.Namespace) -> None:
    from harness.results import exposure_tests
    from harness.stats.diagnostics import method_records
    from harness.stats.exposure_summary import exposure_shares
    from harness.stats.summary import of_folder, one_class

    load_statistics(args.statistics)
    root = Path(args.results).expanduser()  # `~/x` quoted reaches here unexpanded
    if args.alpha is not None and not args.alpha < 0.5:
        raise SettingsError(f"--alpha must be below 0.5 (a test's level), got {args.alpha}")
    target = TARGET if args.target is None else args.target / 100
    chosen = {
        "sides": args.sides,
        "family": args.family,
        "alpha": args.alpha,
        "equivalence_bound": args.target,
    }
    if not args.json:
        print_summary(root, args.seed, target, chosen, args.tasks)
        return
    summary = of_folder(root, args.seed, target, chosen=chosen, tasks=args.tasks)
    shares = exposure_shares(exposure_tests(root))
    records = method_records(root)
    collapsed = one_class(root)
    extra = {"exposure": shares} if shares else {}
    if not records.empty:  # a diagnostic a method did not record is null
        extra["methods"] = records.astype(object).where(records.notna(), None).to_dict("records")
    if not collapsed.empty:  # a condition a task did not run is null
        extra["one_class"] = collapsed.astype(object).where(collapsed.notna(), None).to_dict("records")
    print(strict_json(summary | extra))


STATISTICS_HELP = (
    "your summary statistics, read beside the built-ins: my_stats.py:NAME (a Statistic), or a file or "
    "module that registers them as it loads (harness.api.register)"
)


def load_statistics(targets: list[str]) -> None:
    """The installed statistic plug-ins, then each named: `file.py:NAME` (a Statistic), or a file or module
    that registers its statistics as it loads."""
    from harness.stats.statistics import STATISTICS, register

    fix = "name its statistic as FILE.py:NAME, or call harness.api.register(Statistic(...)) in it"
    for target in targets:
        STATISTICS.load(target, "--statistics", fix, lambda s, attr: register(s))


def add_commands(sub) -> None:
    from harness.grid.configuration.config import GridConfig

    p = command(
        sub,
        "run",
        cmd_run,
        "run an experiment grid: every (task, subsample) unit of a config, each written as it finishes; "
        "the same command resumes, and --shard, --workers or --ray split the units",
        RunOptions,
        GridConfig,
        epilog=CONFIG_KEYS,
    )

    from harness.study.pilot import PilotOptions

    command(
        sub,
        "pilot",
        cmd_pilot,
        "size a confirmatory plan from a pilot: run the study's config on a seed the plan never uses, screen "
        "its tasks (base above chance on train and extra, never test), read the bias's spread and the "
        "planted leak at each strength, and write the plan (its units, leak strength and power calculation)",
        PilotOptions,
        GridConfig,
        epilog=CONFIG_KEYS,
    )

    p = command(
        sub,
        "merge",
        cmd_merge,
        "combine the finished units of shard runs into one results folder and rebuild its tables (shards "
        "run with different settings are refused)",
    )
    p.add_argument("sources", nargs="+", help="the results folders of the shards")
    p.add_argument("--out", required=True, help="the results folder to write the merged units to")

    add_summarize(sub)


def add_summarize(sub) -> None:
    p = command(
        sub,
        "summarize",
        cmd_summarize,
        "print a results folder's summary: per task and overall, the boost, the bias with its paired "
        "permutation test (BH-adjusted) and the smallest bias it could have seen, and the leak beside them",
    )
    p.add_argument("results", help="a results dir in the layout m<m>/n<n>/<model>/<task>/accuracies.csv")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.add_argument("--seed", type=natural, default=0, help="seed of the permutation tests")
    p.add_argument("--statistics", nargs="+", default=[], metavar="FILE", help=STATISTICS_HELP)
    p.add_argument(
        "--target",
        type=positive,
        default=None,
        help=f"the bias, in accuracy points, the study means to see (default {100 * TARGET:g}): a pooled "
        "interval that ends below it reads 'not inflated beyond' it; else the summary says about how many "
        "units would reach it. A confirmatory folder is read with its plan's bound",
    )
    plan = "a folder whose run declared no plan (a confirmatory folder is read with its plan's)"
    p.add_argument(
        "--sides",
        choices=("two", "one"),
        default=None,
        help=f"the bias test's sides for {plan}: two (default) or one (H1: test above extra, the study's)",
    )
    p.add_argument(
        "--family",
        choices=("config", "model"),
        default=None,
        help=f"the p-values Benjamini-Hochberg corrects together, for {plan}: config (default: every "
        "method, dose and cell of the folder) or model (each on its own)",
    )
    p.add_argument(
        "--tasks",
        nargs="+",
        default=None,
        metavar="TASK",
        help="read these tasks alone: a choice made after the data, so the result is post hoc (a "
        "sensitivity analysis), never confirmed",
    )
    p.add_argument(
        "--alpha",
        type=positive,
        default=None,
        help=f"the test's level after the correction, for {plan} (default {ALPHA})",
    )
