"""`tapt-bench report`: one self-contained HTML page of a results folder."""

from __future__ import annotations

import argparse

from harness.cli.parsing import command
from harness.study.front_door import STATISTICS_HELP


def cmd_report(args: argparse.Namespace) -> None:
    import harness

    page = harness.report(
        args.results, args.out, analysis=args.analysis, analyze=args.analyze, statistics=args.statistics
    )
    print(f"report: {page.path} ({page.size / 1024:.0f} KiB)")


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
    p.add_argument("--statistics", nargs="+", default=[], metavar="FILE", help=STATISTICS_HELP)
    p.add_argument("--analysis", help="the fits of `tapt-bench analyze RESULTS --out FILE`, to include")
    p.add_argument(
        "--analyze", action="store_true", help="fit the hierarchical model here (slow on big grids)"
    )
