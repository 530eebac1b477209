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

from harness.spec import TaskError

COLUMNS = ["base", "extra", "test", "majority", "num_classes", "majority_all"]


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


def write_unit(tdir: Path, subsample: int, accuracies: dict[str, Any], probs: pd.DataFrame,
               extra: dict[str, Any]) -> None:
    """Record one finished unit: per-example probabilities, then its accuracies (the marker)."""
    meta, table = unit_paths(tdir, subsample)
    atomic_write(table, probs.assign(subsample=subsample).to_parquet(index=False))
    atomic_write(meta, json.dumps({"subsample": subsample, **accuracies, **extra}, indent=1).encode())


def rebuild(tdir: Path) -> pd.DataFrame:
    """Rewrite accuracies.csv and probabilities.parquet from the finished units; returns the accuracies."""
    units = sorted((json.loads(p.read_text()) for p in (tdir / "units").glob("*.json")),
                   key=lambda u: u["subsample"])
    acc = pd.DataFrame([{c: u[c] for c in COLUMNS} for u in units], columns=COLUMNS)
    atomic_write(tdir / "accuracies.csv", acc.to_csv(index=False).encode())
    tables = [pd.read_parquet(unit_paths(tdir, u["subsample"])[1]) for u in units]
    if tables:
        atomic_write(tdir / "probabilities.parquet", pd.concat(tables, ignore_index=True).to_parquet(index=False))
    return acc


def merge(sources: list[Path], dest: Path) -> list[Path]:
    """Combine the finished units of several shard outputs into `dest`; returns the rebuilt task dirs."""
    touched = set()
    for src in sources:
        in_place = Path(src).resolve() == Path(dest).resolve()
        for meta in sorted(Path(src).glob("m*/n*/*/*/units/*.json")):
            rel = meta.relative_to(src)
            target = Path(dest) / rel
            if not in_place:
                if target.exists() and target.read_bytes() != meta.read_bytes():
                    raise TaskError(f"unit {rel} differs between {src} and {dest}; the shards disagree")
                atomic_write(target.with_suffix(".parquet"), meta.with_suffix(".parquet").read_bytes())
                atomic_write(target, meta.read_bytes())
            touched.add(target.parent.parent)
    for tdir in sorted(touched):
        rebuild(tdir)
    return sorted(touched)

