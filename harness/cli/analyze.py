"""`tapt-bench analyze` (the hierarchical model, its checks and the meta-analysis) and `simulate pca`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.cli.parsing import command
from harness.core.errors import UserError
from harness.core.settings import from_namespace


def cmd_analyze(args: argparse.Namespace) -> None:
    """`analyze RESULTS` fits every selected cell and effect; `analyze meta RESULTS` runs the
    meta-analysis."""
    if args.what[0] == "meta":
        return analyze_meta(args)
    if len(args.what) != 1:
        raise UserError(f"analyze takes one results dir (or `meta RESULTS`), got {args.what}")
    from harness.results import collect
    from harness.stats import analysis, checks, plots

    s = from_namespace(analysis.AnalysisSettings, args)
    source = args.what[0]
    fits, found = [], []
    for label, d, fit in analysis.fits_of(collect(source), s, source, progress=not s.json):
        fits.append(fit)
        if s.plots:
            plots.diagnostics(fit["idata"], label, Path(s.plots))
        if s.checks:
            found.append(checks.model_checks(d, fit, s, label, s.plots))
    if s.plots:
        title = Path(source).name
        plots.average_differences(fits, title, Path(s.plots) / "eq11_average_difference.png")
        plots.task_differences(fits, title, Path(s.plots) / "eq12_tasks.png")
    records = [f["record"] for f in fits]
    if s.out:
        from harness.results import write_json

        write_json(Path(s.out), {"results": source, "fits": records, "checks": found})
    if s.json:
        print(json.dumps({"results": source, "fits": records, "checks": found}))
        return
    print(analysis.format_fits(records))
    for c in found:
        print(checks.format_checks(c))
    if s.plots:
        print(f"plots: {s.plots}")


def analyze_meta(args: argparse.Namespace) -> None:
    from harness.results import collect
    from harness.stats import analysis, plots
    from harness.stats.meta_analysis import (
        MetaAnalysisSettings,
        format_meta_analysis,
        lm_type_agreement,
        meta_analysis,
    )

    if len(args.what) != 2:
        raise UserError(
            f"usage: tapt-bench analyze meta RESULTS --m M --n N [--slices S], got {args.what[1:]}"
        )
    s = from_namespace(MetaAnalysisSettings, args)
    s.check_meta_analysis()
    source = args.what[1]
    df = collect(source)
    ((m, n, rows),) = analysis.cells_of(df, s, source)
    for effect in analysis.effects_of(s):
        result = meta_analysis(rows, s, effect, progress=not s.json)
        agreement = lm_type_agreement(df, effect, s.permutations, s.seed)
        if s.plots:
            plots.meta_cdf(
                result,
                f"{Path(source).name} m={m} n={n} {effect}",
                Path(s.plots) / f"meta_cdf_m{m}_n{n}_{effect}.png",
            )
        if s.json:
            print(json.dumps({"results": source, "meta": result, "lm_type_agreement": agreement}))
        else:
            print(format_meta_analysis(result, agreement, source))


def cmd_simulate_pca(args: argparse.Namespace) -> None:
    from harness.stats.pca_simulation import PcaSettings, format_rows, plot, simulate

    s = from_namespace(PcaSettings, args)
    rows = simulate(s)
    if s.plot:
        plot(rows, s, s.plot)
    settings = {k: v for k, v in vars(s).items() if k not in ("json", "plot")}
    print(json.dumps({"settings": settings, "ranks": rows}) if s.json else format_rows(rows, s))


def register(sub) -> None:
    from harness.stats.meta_analysis import MetaAnalysisSettings
    from harness.stats.pca_simulation import PcaSettings

    p = command(
        sub,
        "analyze",
        cmd_analyze,
        "the hierarchical Bayesian model per (m, n) cell and effect; "
        "`analyze meta RESULTS --m M --n N` for the meta-analysis of single-subsample slices",
        MetaAnalysisSettings,
    )
    p.add_argument(
        "what",
        nargs="+",
        metavar="[meta] RESULTS",
        help="a results dir in the layout "
        "m<m>/n<n>/<model>/<task>/accuracies.csv; `meta RESULTS` for the meta-analysis",
    )

    simulate = sub.add_parser("simulate", help="simulations").add_subparsers(dest="action", required=True)
    command(
        simulate,
        "pca",
        cmd_simulate_pca,
        "PCA fitted on test features vs on extra features: the R^2 bias by "
        "effective rank (a setting where pretraining on test does bias the score)",
        PcaSettings,
    )
