"""`tapt-bench report`: one self-contained HTML page of a results folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.parsing import command
from harness.core.errors import UserError, named, read_json_object


def cmd_report(args: argparse.Namespace) -> None:
    from harness import results
    from harness.cli.run import load_statistics
    from harness.results import atomic_write, collect, file_problem
    from harness.stats import analysis, report

    load_statistics(args.statistics)
    root = Path(args.results).expanduser()
    out = Path(args.out or results.report_path(root)).expanduser()
    problem = file_problem(out) if args.out else None
    if problem:
        raise UserError(f"--out: {problem}")
    if out.is_file() and report.TITLE.encode() not in out.read_bytes()[:300]:
        raise UserError(
            f"{out} exists and is not a tapt-bench report: name another file with --out, or remove it"
        )
    df = collect(root)  # a clear error for a folder without results, before anything is written
    fits = None
    if args.analysis:
        fits = read_json_object(args.analysis, f"--analysis {args.analysis}", FIX_ANALYSIS)
        check_fits(fits, args.analysis)
    elif args.analyze:
        fitted = analysis.fits_of(df, analysis.AnalysisSettings(), str(root), progress=True)
        fits = {"results": str(root), "fits": [fit["record"] for _, _, fit in fitted]}
    try:
        page = report.build(root, fits, df).encode()
    except UserError:  # a file the report reads, named with its fix
        raise
    except (TypeError, ValueError, KeyError, IndexError) as err:  # a number where text was expected...
        calibrated = [str(p) for p in map(results.calibration_path, (root, root.parent)) if p.is_file()]
        inputs = " or ".join(filter(None, [args.analysis and f"--analysis {args.analysis}", *calibrated]))
        if not inputs:  # nothing a user wrote by hand was read: the fault is the report's own
            raise
        raise UserError(
            f"report: a value of the wrong form in {inputs} ({named(err)}); write them "
            "again with the command that makes them (`tapt-bench analyze`, `contamination calibrate`)"
        ) from None
    try:
        atomic_write(out, page)
    except OSError as err:
        raise UserError(
            f"cannot write {out} ({err.strerror}); pass --out with a file you can write"
        ) from None
    print(f"report: {out} ({len(page) / 1024:.0f} KiB)")


FIT_KEYS = (  # what the report reads of each fit record of `analyze --out`
    "m", "n", "effect", "beta_mean", "beta_hdi", "rhat_max", "divergences", "beta_ess_bulk",
    "average_difference", "hdi_prob", "per_task",
)  # fmt: skip


FIX_ANALYSIS = "pass the file written by `tapt-bench analyze RESULTS --out FILE`"


def check_fits(fits: dict, path: str) -> None:
    """The shape of `analyze --out`'s JSON, checked before the page is written."""
    fix = FIX_ANALYSIS
    if not isinstance(fits.get("fits"), list) or not fits["fits"]:
        raise UserError(f"--analysis {path}: expected an object with a non-empty list `fits`; {fix}")
    for i, fit in enumerate(fits["fits"]):
        missing = [k for k in FIT_KEYS if k not in fit] if isinstance(fit, dict) else list(FIT_KEYS)
        if missing:
            raise UserError(f"--analysis {path}: fits[{i}] lacks {missing}; {fix}")


def add_commands(sub) -> None:
    p = command(
        sub,
        "report",
        cmd_report,
        "write one self-contained HTML page of a results folder: its provenance, summary, figures, the "
        "exposure test and the Bayesian fits",
    )
    p.add_argument("results", help="a results dir in the layout m<m>/n<n>/<model>/<task>/accuracies.csv")
    p.add_argument("--out", help="the HTML file (default: RESULTS/report.html)")
    from harness.cli.run import STATISTICS_HELP

    p.add_argument("--statistics", nargs="+", default=[], metavar="FILE", help=STATISTICS_HELP)
    p.add_argument("--analysis", help="the fits of `tapt-bench analyze RESULTS --out FILE`, to include")
    p.add_argument(
        "--analyze", action="store_true", help="fit the hierarchical model here (slow on big grids)"
    )
