"""Shards' outputs merged into one results folder (`tapt-bench merge`): every unit checked to agree first."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness import results
from harness.core.plumbing.errors import SettingsError, UserError
from harness.core.plumbing.settings import differences


def unit_records(sources: list[Path]) -> list[tuple[Path, Path, dict]]:
    """Every finished unit of the sources: (source, record path, record), each record read once."""
    return [
        (Path(src), path, results.read_unit(path))
        for src in sources
        for path in sorted(Path(src).glob(results.UNITS))
    ]


def check_same_settings(units: list[tuple[Path, Path, dict]]) -> None:
    """Refuse shards whose units were made with different settings (per m/n/model folder)."""
    seen: dict[Path, tuple[str, Path, dict]] = {}
    for src, path, unit in units:
        folder = path.relative_to(src).parents[2]
        tag = unit.get("settings_hash", "not recorded")
        first = seen.setdefault(folder, (tag, path, unit.get("settings", {})))
        if first[0] != tag:
            changed = "\n  ".join(differences(first[2], unit.get("settings", {})))
            raise SettingsError(
                f"cannot merge {folder}: {first[1]} and {path} were made with different settings:\n  "
                f"{changed}\nMerge only shards of one config; rerun the odd shard with the "
                "others' config."
            )


def check_same_inputs(units: list[tuple[Path, Path, dict]]) -> None:
    """Refuse shards whose units of one task read other content (another version of its data file, an
    edited task YAML, other weights under the base's name): a rerun into one folder refuses the same."""
    from harness.grid.unit.fingerprints import SHARED, WHAT

    seen: dict[tuple[Path, str], tuple[str, Path]] = {}
    for src, path, unit in units:
        inputs = unit.get("inputs") or {}
        tdir = path.relative_to(src).parents[1]
        for key in SHARED:
            if inputs.get(key) is None:  # a unit written before it was recorded
                continue
            value, first = seen.setdefault((tdir, key), (inputs[key], path))
            if value != inputs[key]:
                raise UserError(
                    f"merge: cannot merge {tdir}: {first} and {path} read other content ({WHAT[key]}): "
                    "merge only shards that read the same inputs; rerun the odd shard on the others' "
                    "inputs"
                )


def refuse_live_runs(dest: Path, chosen: dict[Path, Path]) -> None:
    """Refuse to write into a model folder a live run holds (its lock): its next unit would rebuild the
    tables from under the merge, or stop on the merged units and lose its own."""
    from harness.results import lock

    for mdir in sorted({dest.joinpath(*rel.parts[:3]) for rel in chosen}):
        for path, other in lock.others(mdir, mdir / "none") if mdir.is_dir() else []:
            raise UserError(
                f"merge: a run holds {mdir} (PID {other.get('pid')} on {other.get('host')}, started "
                f"{other.get('started')}; {path.name}): merge into it once that run ends, or into another "
                "--out"
            )


def merge(sources: list[Path], dest: Path) -> list[Path]:
    """Combine the finished units of several shard outputs into `dest`; returns the rebuilt task dirs."""
    missing = [str(s) for s in sources if not Path(s).is_dir()]
    if missing:
        raise UserError(f"merge: no such results folder(s) {missing}; name the shards' output dirs")
    empty = [str(s) for s in sources if not any(Path(s).glob(results.UNITS))]
    if empty:
        raise UserError(
            f"merge: {empty} hold(s) no finished unit (expected {results.UNITS}); is it a shard's output dir?"
        )
    problem = results.folder_problem(dest)
    if problem:
        raise UserError(f"merge: --out {dest}: {problem}")
    recordless = [
        str(table)
        for src in sources
        for table in sorted(Path(src).glob(results.UNITS.replace(".json", ".parquet")))
        if not table.with_suffix(".json").is_file()
    ]
    if recordless:
        raise UserError(
            f"merge: {len(recordless)} unit table(s) without their record (e.g. {recordless[0]}): a unit "
            "whose .json is gone is not finished, and merging would drop it without a word; restore the "
            ".json, or rerun that shard (it recomputes the unit), then merge"
        )
    units = unit_records([*sources, dest] if Path(dest).exists() else list(sources))
    check_same_settings(units)
    check_same_inputs(units)
    chosen: dict[Path, Path] = {}  # unit (relative) -> the file it is copied from: every clash first
    for src in [dest, *sources] if Path(dest).exists() else sources:
        for path in sorted(Path(src).glob(results.UNITS)):
            rel = path.relative_to(src)
            first = chosen.setdefault(rel, path)
            if not same_unit(first, path):
                raise UserError(
                    f"merge: unit {rel} differs between {first} and {path} (not only in its timings): the "
                    "shards disagree; merge shards of one run, or delete the unit you do not trust"
                )
    refuse_live_runs(Path(dest), chosen)
    touched = set()
    for rel, path in chosen.items():
        target = Path(dest) / rel
        if path.resolve() != target.resolve():
            results.atomic_write(results.unit_table(target), results.unit_table(path).read_bytes())
            results.atomic_write(target, path.read_bytes())
        touched.add(target.parent.parent)
    for tdir in sorted(touched):
        results.rebuild(tdir)
    copy_manifests(sources, Path(dest))
    return sorted(touched)


def copy_manifests(sources: list[Path], dest: Path) -> None:
    """Each source's run manifests into dest's model folders (a name taken by another run's gets a
    number), so the merged report still shows each run's versions, code and start time."""
    for src in sources:
        for path in results.model_manifests(src):
            target = dest / path.relative_to(src)
            if path.resolve() == target.resolve():
                continue
            k = 1
            while target.exists() and target.read_bytes() != path.read_bytes():
                k += 1
                target = target.with_name(f"{path.stem}-{k}.json")
            results.atomic_write(target, path.read_bytes())


def same_unit(a: Path, b: Path) -> bool:
    """Two records of one unit agree: the same numbers and settings (timings may differ), and the same
    per-example probabilities."""
    if a.read_bytes() == b.read_bytes():
        return True
    ja, jb = (without_timings(results.read_unit(p)) for p in (a, b))
    if ja != jb:
        return False
    pa, pb = (pd.read_parquet(results.unit_table(p)) for p in (a, b))
    return pa.equals(pb)


def without_timings(record):
    """A unit's record without how it was computed (results.PROVENANCE) and without any timing nested in
    it (a training record's `seconds_per_step`): what a resumed run may differ in."""
    if isinstance(record, dict):
        return {
            k: without_timings(v)
            for k, v in record.items()
            if k not in (*results.PROVENANCE, results.SEAL) and "seconds" not in k
        }
    if isinstance(record, list):
        return [without_timings(v) for v in record]
    return record
