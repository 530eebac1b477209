"""Each detector's false positives pooled over the methods of shipped studies, each model counted once.

`calibrate` reads a detector's error rates per method. Pooled over methods, the base is the same model
in every method's unit of a (task, subsample), so its p-value is listed once per method: here it counts
once. A (task, subsample)'s models across methods share their documents, so the interval by unit
clusters them together (harness.core.design.power.clustered_wilson). Usage:
    python benchmarks/pooled_rates.py studies/methods_study studies/methods_study_tlm
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from contamination.detectors import DETECTORS, error_rates
from harness import results
from harness.core.design import conditions
from harness.core.plumbing.errors import UserError, read_json_object

COLUMNS = ("false_positive", "null")


def pooled(folders: list[Path]) -> pd.DataFrame:
    """Every folder's p-values, the base's once per (m, n, seed, task, subsample, detector): studies of
    the same design draw the same documents, so their base is one model."""
    frames = []
    for folder in folders:
        path = results.calibration_path(folder)
        fix = "write it again: `tapt-bench contamination calibrate --config NAME --out FOLDER --train false`"
        calibration = read_json_object(path, f"{path} (the detectors' error rates)", fix)
        design = {k: calibration["settings"][k] for k in ("m", "n", "seed")}
        frames.append(pd.DataFrame(calibration["pvalues"]).assign(**design))
    rows = pd.concat(frames, ignore_index=True)
    base = rows["condition"] == conditions.BASE
    once = rows[base].drop_duplicates(["m", "n", "seed", "task", "subsample", "detector"])
    return pd.concat([rows[~base], once], ignore_index=True)


def cell(r: dict) -> str:
    return (
        f"{r['flagged']}/{r['models']} {r['rate']:.1%} [{r['low']:.1%}, {r['high']:.1%}] "
        f"[{r['unit_low']:.1%}, {r['unit_high']:.1%}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", type=Path, nargs="+", help="folders holding a calibration.json")
    args = parser.parse_args()
    folders = [f.expanduser() for f in args.folders]
    missing = [str(f) for f in folders if not results.calibration_path(f).is_file()]
    if missing:
        sys.exit(
            f"pooled_rates: no calibration.json in {', '.join(missing)}; write one with `tapt-bench "
            "contamination calibrate --config NAME --out FOLDER --train false`"
        )
    try:
        df = pooled(folders)
    except UserError as err:
        sys.exit(f"pooled_rates: {err}")
    sees = {name: d.sees for name, d in DETECTORS.items()}
    print("detector | false positives (base once, extra; label detectors: test too) | null models")
    for r in error_rates(df[df["detector"].isin(sees)], sees, by=("detector",)):
        base = r["by_condition"].get(conditions.BASE)
        print(
            f"{r['detector']} | {cell(r['false_positive'])} | {cell(r['null']) if 'null' in r else '-'}"
            + (f" | base alone {cell(base)}" if base else "")
        )


if __name__ == "__main__":
    main()
