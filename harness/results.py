"""Results in the study's layout, written atomically unit by unit.

    <out>/m<m>/n<n>/<model-tag>/<task>/accuracies.csv        one row per subsample, in index order
    <out>/m<m>/n<n>/<model-tag>/<task>/probabilities.parquet  per-example class probabilities
    <out>/m<m>/n<n>/<model-tag>/<task>/units/<k>.json|.parquet one finished (task, subsample) unit

A unit's .json is written last (after its .parquet) and marks it finished; the two tables are
rebuilt from the finished units, so a killed run loses at most the unit in flight.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from harness.settings import differences

from harness.errors import SettingsError, UserError

COLUMNS = ["base", "extra", "test", "majority", "num_classes", "majority_all"]
OPTIONAL = ["leak"]  # a grid run with the planted-leak condition adds its column after the study's six


def task_dir(out: Path, m: int, n: int, model_tag: str, slug: str) -> Path:
    return Path(out) / f"m{m}" / f"n{n}" / model_tag / slug


def atomic_write(path: Path, data: bytes) -> None:
    """Write via a temporary file and rename, so `path` is either old or complete, never partial."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def unit_paths(tdir: Path, subsample: int) -> tuple[Path, Path]:
    return tdir / "units" / f"{subsample}.json", tdir / "units" / f"{subsample}.parquet"


def is_done(tdir: Path, subsample: int) -> bool:
    return unit_paths(tdir, subsample)[0].is_file()


def finished(tdir: Path) -> dict[int, dict[str, Any]]:
    """The finished units of a task dir: subsample -> its recorded JSON (accuracies, settings, timings)."""
    units = (json.loads(p.read_text()) for p in sorted((tdir / "units").glob("*.json")))
    return {u["subsample"]: u for u in units}


def remove_unit(tdir: Path, subsample: int) -> None:
    """Delete a finished unit: the marker first, so a kill in between leaves it unfinished, not half."""
    for path in unit_paths(tdir, subsample):
        path.unlink(missing_ok=True)


def write_unit(tdir: Path, subsample: int, accuracies: dict[str, Any], probs: pd.DataFrame,
               extra: dict[str, Any]) -> None:
    """Record one finished unit: per-example probabilities, then its accuracies (the marker)."""
    meta, table = unit_paths(tdir, subsample)
    atomic_write(table, probs.assign(subsample=subsample).to_parquet(index=False))
    atomic_write(meta, json.dumps({"subsample": subsample, **accuracies, **extra}, indent=1).encode())


def rebuild(tdir: Path) -> pd.DataFrame:
    """Rewrite accuracies.csv and probabilities.parquet from the finished units; returns the accuracies."""
    units = list(finished(tdir).values())
    columns = COLUMNS + [c for c in OPTIONAL if units and all(c in u for u in units)]
    acc = pd.DataFrame([{c: u[c] for c in columns} for u in units], columns=columns)
    atomic_write(tdir / "accuracies.csv", acc.to_csv(index=False).encode())
    tables = [pd.read_parquet(unit_paths(tdir, u["subsample"])[1]) for u in units]
    if tables:
        atomic_write(tdir / "probabilities.parquet", pd.concat(tables, ignore_index=True).to_parquet(index=False))
    return acc


def check_same_settings(sources: list[Path]) -> None:
    """Refuse shards whose units were made with different settings (per m/n/model folder)."""
    seen: dict[Path, tuple[str, Path]] = {}
    for src in sources:
        for meta in sorted(Path(src).glob("m*/n*/*/*/units/*.json")):
            folder = meta.relative_to(src).parents[2]
            unit = json.loads(meta.read_text())
            tag = unit.get("settings_hash", "not recorded")
            first = seen.setdefault(folder, (tag, meta, unit.get("settings", {})))
            if first[0] != tag:
                changed = "\n  ".join(differences(first[2], unit.get("settings", {})))
                raise SettingsError(
                    f"cannot merge {folder}: {first[1]} and {meta} were made with different settings:\n  "
                    f"{changed}\nMerge only shards of one config; rerun the odd shard with the others' config."
                )


def merge(sources: list[Path], dest: Path) -> list[Path]:
    """Combine the finished units of several shard outputs into `dest`; returns the rebuilt task dirs."""
    check_same_settings([*sources, dest] if Path(dest).exists() else list(sources))
    touched = set()
    for src in sources:
        in_place = Path(src).resolve() == Path(dest).resolve()
        for meta in sorted(Path(src).glob("m*/n*/*/*/units/*.json")):
            rel = meta.relative_to(src)
            target = Path(dest) / rel
            if not in_place:
                if target.exists() and target.read_bytes() != meta.read_bytes():
                    raise UserError(f"unit {rel} differs between {src} and {dest}; the shards disagree")
                atomic_write(target.with_suffix(".parquet"), meta.with_suffix(".parquet").read_bytes())
                atomic_write(target, meta.read_bytes())
            touched.add(target.parent.parent)
    for tdir in sorted(touched):
        rebuild(tdir)
    return sorted(touched)

