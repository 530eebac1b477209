"""`tapt-bench run`, `merge` and `summarize`: a grid, its shards, and its summary tables."""

from __future__ import annotations

import argparse
import sys

from harness.cli.parsing import command, natural, positive, strict_json
from harness.core.design.power import ALPHA, TARGET
from harness.core.plumbing.settings import field_names, from_namespace
from harness.study.front_door import STATISTICS_HELP
from harness.study.run_options import RunOptions

CONFIG_KEYS = (
    "config keys: each flag here is also a key of the config file (--data-dir is data_dir); a flag given "
    "overrides the file, and the file overrides the default shown (input paths in a file resolve against "
    "its folder, out against the current one)"
)


def cmd_run(args: argparse.Namespace) -> None:
    import harness

    opts = from_namespace(RunOptions, args)
    ran = harness.run(opts.config, **own(RunOptions, args), **config_keys(args))
    if opts.shard_pair()[1] == 1 and opts.summary:  # one summary of the run's models, read together
        sys.stdout.write(ran.summary().text())


def own(cls: type, args: argparse.Namespace) -> dict:
    """A command's own settings (its options dataclass's fields but the config) from its flags."""
    return {k: getattr(args, k) for k in field_names(cls) if k != "config"}


def config_keys(args: argparse.Namespace) -> dict:
    """The config keys given as flags (a flag not given is not in the namespace)."""
    from harness.grid.configuration.config import GridConfig

    return {k: getattr(args, k) for k in field_names(GridConfig) if hasattr(args, k)}


def cmd_pilot(args: argparse.Namespace) -> None:
    import harness
    from harness.study.pilot import PilotOptions

    opts = from_namespace(PilotOptions, args)
    harness.pilot(opts.config, **own(PilotOptions, args), **config_keys(args))


def cmd_merge(args: argparse.Namespace) -> None:
    import harness

    for tdir in harness.merge(args.sources, args.out):
        print(f"merged {tdir}")


def cmd_summarize(args: argparse.Namespace) -> None:
    import harness

    summary = harness.summarize(
        args.results,
        seed=args.seed,
        target=args.target,
        sides=args.sides,
        family=args.family,
        alpha=args.alpha,
        tasks=args.tasks,
        statistics=args.statistics,
    )
    sys.stdout.write(strict_json(summary.to_dict()) + "\n" if args.json else summary.text())


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

    p = command(
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
    p.flags["leak_strength"].help = argparse.SUPPRESS  # the pilot's --strengths set it, one after another

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
