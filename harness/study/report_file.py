"""The report's one HTML file: where it goes, what it may replace, the fits it includes, and its write."""

from __future__ import annotations

from pathlib import Path

from harness import results
from harness.core.plumbing.errors import UserError, named, read_json_object

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


def target(root: Path, out: str | Path | None) -> Path:
    """The page's file: `out`, else <results>/report.html; refused where it is not a file of ours to
    replace (a device, a folder, a file that is no tapt-bench report)."""
    from harness.stats.presentation import report

    path = Path(out or results.report_path(root)).expanduser()
    problem = results.file_problem(path) if out else None
    if problem:
        raise UserError(f"--out: {problem}")
    if path.is_file() and report.TITLE.encode() not in path.read_bytes()[:300]:
        raise UserError(
            f"{path} exists and is not a tapt-bench report: name another file with --out, or remove it"
        )
    return path


def fits_for(root: Path, df, analysis: str | None, analyze: bool) -> dict | None:
    """The Bayesian fits the page shows: read from `analysis` (analyze --out's file), fitted here
    (`analyze`), or none."""
    from harness.stats.bayes import analysis as fitting

    if analysis:
        fits = read_json_object(analysis, f"--analysis {analysis}", FIX_ANALYSIS)
        check_fits(fits, analysis)
        return fits
    if analyze:
        fitted = fitting.fits_of(df, fitting.AnalysisSettings(), str(root), progress=True)
        return {"results": str(root), "fits": [fit["record"] for _, _, fit in fitted]}
    return None


def write_report(root: Path, out: str | Path | None, analysis: str | None, analyze: bool) -> tuple[Path, int]:
    """Build and write the page; (its file, its bytes). Nothing is written where an input is refused."""
    from harness.stats.presentation import report

    path = target(root, out)
    df = results.collect(root)  # a clear error for a folder without results, before anything is written
    fits = fits_for(root, df, analysis, analyze)
    try:
        page = report.build(root, fits, df).encode()
    except UserError:  # a file the report reads, named with its fix
        raise
    except (TypeError, ValueError, KeyError, IndexError) as err:  # a number where text was expected...
        calibrated = [str(p) for p in map(results.calibration_path, (root, root.parent)) if p.is_file()]
        inputs = " or ".join(filter(None, [analysis and f"--analysis {analysis}", *calibrated]))
        if not inputs:  # nothing a user wrote by hand was read: the fault is the report's own
            raise
        raise UserError(
            f"report: a value of the wrong form in {inputs} ({named(err)}); write them "
            "again with the command that makes them (`tapt-bench analyze`, `contamination calibrate`)"
        ) from None
    try:
        results.atomic_write(path, page)
    except OSError as err:
        raise UserError(
            f"cannot write {path} ({err.strerror}); pass --out with a file you can write"
        ) from None
    return path, len(page)
