"""Results read back: every accuracies.csv under a root, checked, with each unit's collapsed models and
flips; the probabilities, the model folders, and the detectors' error rates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.design import conditions
from harness.core.plumbing.errors import UserError, named, read_json_object
from harness.results.outcomes import FLIPS, collapsed, flips, predicted, test_majority
from harness.results.paths import (
    COLUMNS,
    LAYOUT,
    NOT_ADAPTED,
    ONE_CLASS,
    TEST_MAJORITY,
    calibration_path,
    read_table,
    shard_locks,
)
from harness.results.units import finished, stale_tables


def read_accuracies(path: Path, n: int) -> pd.DataFrame:
    """One accuracies.csv, checked: readable, all columns, accuracies multiples of 1/n."""
    try:
        df = pd.read_csv(path)
    except Exception as err:  # any parser failure means an unusable file
        raise UserError(f"{path}: unreadable accuracies.csv ({named(err)})") from err
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise UserError(f"{path}: missing column(s) {missing}; expected {COLUMNS}")
    optional = [c for c in conditions.OPTIONAL if c in df.columns]
    for col in COLUMNS + optional:
        numbers = pd.to_numeric(df[col], errors="coerce")
        bad = numbers.isna()
        if bad.any():
            row = int(bad.to_numpy().argmax())
            raise UserError(
                f"{path}: row {row} (line {row + 2}), column {col!r}: {df[col].iloc[row]!r} is not a "
                "number; fix or delete that row"
            )
        df[col] = numbers
    if NOT_ADAPTED in df:
        df[NOT_ADAPTED] = df[NOT_ADAPTED].fillna("").astype(str)
    accs = df[[*conditions.PAIRED, *optional]]
    outside = (accs < 0) | (accs > 1)
    if outside.any().any():
        row, j = np.argwhere(outside.to_numpy())[0]
        col = accs.columns[j]
        raise UserError(
            f"{path}: row {row} (line {row + 2}), column {col!r}: accuracy {accs[col].iloc[row]} is outside "
            "[0, 1]; fix or delete that row"
        )
    counts = accs.to_numpy(dtype=float) * n
    off = np.abs(counts - np.round(counts)) > 1e-6
    if off.any():
        row = int(np.argwhere(off)[0][0])
        raise UserError(
            f"{path}: row {row} is not a multiple of 1/{n} although the folder says n={n}: "
            "rows of another n are mixed into this folder; keep one n per n<n> folder"
        )
    return df


def collect(root: str | Path) -> pd.DataFrame:
    """Every accuracies.csv under root, one row per subsample, with its m, n, model, task and subsample."""
    root = Path(root)
    if root.is_file():
        raise UserError(f"{root} is a file; name the results folder a run wrote (its --out)")
    if not root.is_dir():
        raise UserError(f"{root}: no such results folder")
    for tdir in sorted(p.parent for p in root.rglob("units") if p.is_dir()):
        why = stale_tables(tdir)
        if why:
            locks = ", ".join(lock.name for lock in shard_locks(tdir.parent))
            live = f"; {locks} is there: if that run still writes, read it when it ends" if locks else ""
            raise UserError(
                f"{tdir}: {why}: its tables are stale, and reading them would skip units. Rerun the grid "
                f"with the same config and --out (it runs nothing finished and rebuilds the tables){live}"
            )
    frames, paths = [], sorted(root.rglob("accuracies.csv"))
    for path in paths:
        match = LAYOUT.search(path.as_posix())
        if not match:
            raise UserError(f"{path}: not in the layout m<m>/n<n>/<model>/<task>/accuracies.csv")
        m, n, model, task = match.groups()
        df = read_accuracies(path, int(n))
        ks, one, flips, shares = unit_classes(path.parent / "probabilities.parquet", len(df))
        if np.isnan(
            shares
        ).all():  # accuracies alone, in the study's release format: its majority is the study's
            shares = df["majority"].tolist()
        read = {ONE_CLASS: one, TEST_MAJORITY: shares}
        frames.append(df.assign(m=int(m), n=int(n), model=model, task=task, subsample=ks, **read, **flips))
    if not frames:
        raise UserError(f"{root}: no accuracies.csv found (expected m<m>/n<n>/<model>/<task>/accuracies.csv)")
    refuse_sibling_runs(root, frames, paths)
    return pd.concat(frames, ignore_index=True)


def refuse_sibling_runs(root: Path, frames: list[pd.DataFrame], paths: list[Path]) -> None:
    """Refuse a folder that holds two runs with the same unit (m, n, model, task, subsample): sibling runs
    (leak-1/ and leak-4/ of a pilot, two copies of one run) would count the same subsamples twice as if
    independent. Each run is read on its own, by its folder."""
    seen: dict[tuple, Path] = {}
    for df, path in zip(frames, paths):  # collect's own files, in its order: one frame each
        run = path.parents[4].relative_to(root) if len(path.relative_to(root).parts) > 5 else Path(".")
        for k in df["subsample"]:
            key = (
                int(df["m"].iloc[0]),
                int(df["n"].iloc[0]),
                df["model"].iloc[0],
                df["task"].iloc[0],
                int(k),
            )
            if key in seen and seen[key] != run:
                m, n, model, task, sub = key
                raise UserError(
                    f"{root}: holds two runs of the same unit (m{m}/n{n}/{model}/{task} subsample {sub}) in "
                    f"{root / seen[key]} and {root / run}: their units are not independent, so they are "
                    "never pooled; summarize each run's folder on its own"
                )
            seen[key] = run


def unit_classes(probs_path: Path, rows: int) -> tuple[list[int], list[str | None], dict[str, list], list]:
    """Each accuracies.csv row's subsample, its collapsed conditions (ONE_CLASS), its flips (FLIPS) and its
    test documents' majority share (TEST_MAJORITY), from the probabilities the same rebuild wrote (its
    units in the same order). A table that holds other units is an error naming it; accuracies alone (made
    elsewhere, without unit records) give row numbers, None and NaN: the collapse could not be checked."""
    if not probs_path.is_file():  # beside unit records, collect refused it first (stale_tables)
        return list(range(rows)), [None] * rows, {c: [np.nan] * rows for c in FLIPS}, [np.nan] * rows
    probs = read_table(probs_path)
    ks = [int(k) for k in pd.unique(probs["subsample"])]
    if len(ks) != rows:
        kept = len(finished(probs_path.parent))
        fix = (
            f"rerun the grid with the same config and --out: it rebuilds both from the {kept} unit record(s) "
            "in units/ and computes nothing they hold"
            if kept
            else "no unit records lie beside them (units/), so nothing can rebuild them: restore the two as "
            "they were written, or rerun the grid into the same --out to compute every unit again"
        )
        raise UserError(
            f"{probs_path}: holds {len(ks)} units and its accuracies.csv {rows}: the two tables "
            f"disagree; {fix}"
        )
    units = [group for _, group in predicted(probs).groupby("subsample", sort=False)]
    flipped = [flips(u) for u in units]
    shares = [test_majority(u) for u in units]
    return ks, [collapsed(u) for u in units], {c: [f[c] for f in flipped] for c in FLIPS}, shares


def measured(df: pd.DataFrame, effect: str) -> pd.Series:
    """The rows whose two conditions of `effect` are both adaptations (or the base): an effect of a
    condition whose method adapted on nothing is not a measurement of the method."""
    pair = conditions.EFFECTS[effect]
    if NOT_ADAPTED not in df:
        return pd.Series(True, index=df.index)
    skipped = df[NOT_ADAPTED].fillna("").astype(str).str.split(",")
    return ~skipped.map(lambda conds: any(c in conds for c in pair))


def probabilities(root: str | Path) -> dict[str, pd.DataFrame]:
    """Per task folder under root, by its path from root (as `predictions`): its probabilities table."""
    return {
        path.parent.relative_to(root).as_posix(): read_table(path)
        for path in sorted(Path(root).rglob("probabilities.parquet"))
    }


def model_dirs(root: str | Path) -> dict[tuple[int, int, str], Path]:
    """Every model folder under root (or root itself, a model folder), by (m, n, model)."""
    out = {}
    for path in sorted(Path(root).rglob("accuracies.csv")):
        match = LAYOUT.search(path.as_posix())
        if match:
            m, n, model, _ = match.groups()
            out[(int(m), int(n), model)] = path.parent.parent
    return out


def calibration(root: str | Path) -> dict | None:
    """The detectors' error rates of `contamination calibrate` in root or its parent (root being one
    mode's grid), None where there are none."""
    for folder in (Path(root), Path(root).parent):
        path = calibration_path(folder)
        if path.is_file():
            fix = "delete it, or rerun `tapt-bench contamination calibrate` to write it again"
            return read_json_object(path, f"{path} (the detectors' error rates)", fix)
    return None
