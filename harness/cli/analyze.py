"""`tapt-bench analyze` (the hierarchical model, its checks and the meta-analysis) and `simulate pca`."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.parsing import command, strict_json
from harness.core.plumbing.errors import UserError
from harness.core.plumbing.settings import from_namespace

SUBCOMMANDS = ("fit", "meta")


def with_subcommand(argv: list[str]) -> list[str]:
    """`analyze RESULTS` is short for `analyze fit RESULTS` (the command the study's users know)."""
    if argv[:1] == ["analyze"] and len(argv) > 1 and argv[1] not in (*SUBCOMMANDS, "-h", "--help"):
        return ["analyze", "fit", *argv[1:]]
    return argv


def cmd_analyze(args: argparse.Namespace) -> None:
    """`analyze fit RESULTS` (or `analyze RESULTS`) fits every selected cell and effect."""
    from harness.results import collect
    from harness.stats.bayes import analysis, checks, plots

    s = from_namespace(analysis.AnalysisSettings, args)
    source = args.results
    check_outputs(s)
    fits, found = [], []
    for label, d, fit in analysis.fits_of(collect(source), s, source, progress=not s.json):
        fits.append(fit)
        if s.plots:
            plots.diagnostics(fit["idata"], label, Path(s.plots))
        if s.checks:
            found.append(checks.model_checks(d, fit, s, label, s.plots))
    if s.plots:
        title = Path(source).name
        eq11, eq12 = plots.SUMMARY_PLOTS
        plots.average_differences(fits, title, Path(s.plots) / eq11)
        plots.task_differences(fits, title, Path(s.plots) / eq12)
    records = [f["record"] for f in fits]
    if s.out:
        from harness.results import WRITTEN_BY, write_json

        write_json(
            Path(s.out), {"written_by": WRITTEN_BY, "results": source, "fits": records, "checks": found}
        )
    if s.json:
        print(strict_json({"results": source, "fits": records, "checks": found}))
        return
    print(analysis.format_fits(records, s.every_task))
    for c in found:
        print(checks.format_checks(c))
    if s.plots:
        print(f"plots: {s.plots}")


def check_outputs(s) -> None:
    """--out (a JSON file) and --plots (a folder) checked before the fits, which take minutes."""
    from harness.results import folder_problem, json_output_problem
    from harness.stats.bayes.plots import SUMMARY_PLOTS, plot_problem

    older = ({"results", "fits"}, {"results", "metas"})  # fits and metas written before the mark
    named = [plot_problem(Path(s.plots) / name) for name in SUMMARY_PLOTS] if s.plots else []
    for flag, problem in (
        ("--out", s.out and json_output_problem(s.out, "fits.json", older)),
        ("--plots", s.plots and (folder_problem(s.plots) or next(filter(None, named), None))),
    ):
        if problem:
            raise UserError(f"{flag}: {problem}")


def analyze_meta(args: argparse.Namespace) -> None:
    from harness.results import collect
    from harness.stats.bayes import analysis, plots
    from harness.stats.bayes.meta_analysis import (
        MetaAnalysisSettings,
        format_meta_analysis,
        lm_type_agreement,
        meta_analysis,
    )

    s = from_namespace(MetaAnalysisSettings, args)
    s.check_meta_analysis()
    check_outputs(s)
    source = args.results
    df = collect(source)
    ((m, n, rows),) = analysis.cells_of(df, s, source)
    metas = []
    for effect in analysis.effects_of(s):
        result = meta_analysis(rows, s, effect, progress=not s.json)
        agreement = lm_type_agreement(df, effect, s.permutations, s.seed)
        if s.plots:
            plots.meta_cdf(
                result,
                f"{Path(source).name} m={m} n={n} {effect}",
                Path(s.plots) / f"meta_cdf_m{m}_n{n}_{effect}.png",
            )
        meta = {"results": source, "meta": result, "lm_type_agreement": agreement}
        metas.append(meta)
        if s.json:
            print(strict_json(meta))
        else:
            print(format_meta_analysis(result, agreement, source))
    if s.out:  # every effect's meta-analysis, as --json prints each
        from harness.results import WRITTEN_BY, atomic_write

        atomic_write(
            Path(s.out), strict_json({"written_by": WRITTEN_BY, "results": source, "metas": metas}).encode()
        )


def cmd_simulate_pca(args: argparse.Namespace) -> None:
    from harness.stats.bayes.pca_simulation import PcaSettings, format_rows, plot, simulate
    from harness.stats.bayes.plots import plot_problem

    s = from_namespace(PcaSettings, args)
    problem = s.plot and plot_problem(s.plot)  # before the simulation runs
    if problem:
        raise UserError(f"--plot: {problem}")
    rows = simulate(s)
    if s.plot:
        plot(rows, s, s.plot)
    settings = {k: v for k, v in vars(s).items() if k not in ("json", "plot")}
    print(strict_json({"settings": settings, "ranks": rows}) if s.json else format_rows(rows, s))


def add_commands(sub) -> None:
    from harness.stats.bayes.analysis import AnalysisSettings
    from harness.stats.bayes.meta_analysis import MetaAnalysisSettings
    from harness.stats.bayes.pca_simulation import PcaSettings

    analyze = sub.add_parser(
        "analyze",
        help="the hierarchical Bayesian model (`analyze RESULTS` is `analyze fit RESULTS`)",
        description="`analyze fit RESULTS` (or `analyze RESULTS`): the model per cell; "
        "`analyze meta RESULTS`: the meta-analysis",
        epilog="each one's flags: `tapt-bench analyze fit --help`, `tapt-bench analyze meta --help`",
    ).add_subparsers(dest="action", required=True)
    results = "a results dir in the layout m<m>/n<n>/<model>/<task>/accuracies.csv"
    fit = command(
        analyze,
        "fit",
        cmd_analyze,
        "the hierarchical Bayesian model per (m, n) cell and effect",
        AnalysisSettings,
    )
    fit.add_argument("results", metavar="RESULTS", help=results)
    meta = command(
        analyze,
        "meta",
        analyze_meta,
        "the meta-analysis of single-subsample slices of one cell (--m, --n)",
        MetaAnalysisSettings,
    )
    meta.add_argument("results", metavar="RESULTS", help=results)

    simulate = sub.add_parser(
        "simulate",
        help="a simulation where pretraining on the test features does bias the score",
        description="a simulation where pretraining on the test features does bias the score",
    ).add_subparsers(dest="action", required=True)
    command(
        simulate,
        "pca",
        cmd_simulate_pca,
        "PCA fitted on test features vs on extra features: the R^2 bias by "
        "effective rank (a setting where pretraining on test does bias the score)",
        PcaSettings,
    )
