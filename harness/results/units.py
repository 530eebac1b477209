"""A run's finished units: each written atomically (its table, then its record, the marker), read back,
removed; the two task tables rebuilt from them; their exposure tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from harness.core.design import conditions
from harness.core.plumbing.errors import UserError, named
from harness.core.plumbing.settings import fingerprint
from harness.results.paths import (
    COLUMNS,
    NOT_ADAPTED,
    SEAL,
    UNIT_LAYOUT,
    atomic_write,
    read_table,
    unit_paths,
    unit_table,
)


def is_done(tdir: Path, subsample: int) -> bool:
    """A unit is finished when both its record and its table are there (the table is written first, the
    record last; a table lost after it leaves the unit to compute again)."""
    return all(p.is_file() for p in unit_paths(tdir, subsample))


def read_unit(path: Path) -> dict[str, Any]:
    """One unit's record; a file that is not one (cut short, edited) is named, with the fix."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(
            f"{path}: not a readable unit record ({named(err)}); delete it and its "
            f"{Path(path).with_suffix('.parquet').name} to recompute that unit (rerun the grid)"
        ) from None
    if not isinstance(record, dict) or not isinstance(record.get("subsample"), int):
        raise UserError(
            f"{path}: not a unit record (no subsample index); delete it and its "
            f"{Path(path).with_suffix('.parquet').name} to recompute that unit (rerun the grid)"
        )
    return record


def unit_records(tdir: Path) -> list[Path]:
    """The finished units' records of a task dir (unit_paths: a record whose table is missing is not a
    finished unit), in order."""
    found = [
        p for p in (tdir / "units").glob("*.json") if p.stem.isdigit()
    ]  # a note of the user's is no unit
    return [p for p in sorted(found, key=lambda p: int(p.stem)) if p.with_suffix(".parquet").is_file()]


def null_records(tdir: Path) -> list[Path]:
    """calibrate's null models of a task dir (null_model_path), in order."""
    return sorted((tdir / "null").glob("*.json"))


def task_dirs(mdir: Path) -> list[Path]:
    """The task folders of a model folder that hold units."""
    return [tdir for tdir in sorted(mdir.iterdir()) if (tdir / "units").is_dir()]


def unit_files(folder: str | Path) -> list[Path]:
    """Every unit record under a folder (a results root, a model or a task folder), in path order."""
    return sorted(Path(folder).rglob("units/[0-9]*.json"))


def any_unit(mdir: Path) -> Path | None:
    """A unit record of a model folder (its first), None where it has none."""
    return next(iter(unit_files(mdir)), None)


def finished(tdir: Path) -> dict[int, dict[str, Any]]:
    """The finished units of a task dir: subsample -> its record (accuracies, settings, timings)."""
    records = (read_unit(p) for p in unit_records(tdir))
    return {r["subsample"]: r for r in records}


def stale_tables(tdir: Path) -> str | None:
    """Why a task dir's accuracies.csv does not hold its finished units (units copied in, a run stopped
    between a unit and its table), or None where it does. Counts rows against records, no table read."""
    units = len(unit_records(tdir))
    table = tdir / "accuracies.csv"
    if not units:
        return None
    if not table.is_file():
        return f"{units} finished unit(s) in units/ and no accuracies.csv"
    if not (tdir / "probabilities.parquet").is_file():
        return f"{units} finished unit(s) in units/ and no probabilities.parquet"
    with table.open() as f:
        rows = sum(1 for _ in f) - 1
    return None if rows == units else f"{units} finished unit(s) in units/ and {rows} in accuracies.csv"


def remove_unit(tdir: Path, subsample: int) -> None:
    """Delete a finished unit: the record first, so a kill in between leaves it unfinished, not half."""
    for path in unit_paths(tdir, subsample):
        path.unlink(missing_ok=True)


def write_unit(
    tdir: Path, subsample: int, accuracies: dict[str, Any], probs: pd.DataFrame, record: dict[str, Any]
) -> None:
    """Record one finished unit: per-example probabilities, then its accuracies and record (the marker)."""
    record_path, table = unit_paths(tdir, subsample)
    body = {"subsample": subsample, **accuracies, **record}
    data = json.dumps({**body, SEAL: fingerprint(body)}, indent=1).encode()  # fails before any write
    atomic_write(table, probs.assign(subsample=subsample).to_parquet(index=False))
    atomic_write(record_path, data)


def rewrite_unit(path: Path, record: dict[str, Any]) -> None:
    """A unit record changed by a tool of ours after its run (codec_retest's blocks): sealed again where it
    was sealed, so that only an edit by hand reads as damage."""
    body = {k: v for k, v in record.items() if k != SEAL}
    atomic_write(
        Path(path),
        json.dumps({**body, SEAL: fingerprint(body)} if SEAL in record else body, indent=1).encode(),
    )


def same_settings(old: dict | None, new: dict) -> bool:
    """Recorded settings alike; a plug-in flow's file read from another folder is the same flow where its
    code is the same (its flow_code): where it lies changes no number."""
    if old == new:
        return True
    code = (old or {}).get("flow_code")
    return bool(code) and code == new.get("flow_code") and {**old, "flow": 0} == {**new, "flow": 0}


def rebuild(tdir: Path, settings: dict | None = None) -> pd.DataFrame:
    """Rewrite accuracies.csv and probabilities.parquet from the finished units (with `settings`, those
    recorded with them alone: units of other settings left for their own shard's rerun, and the tables
    then said to be stale); returns the accuracies."""
    units = [
        u for u in finished(tdir).values() if settings is None or same_settings(u.get("settings"), settings)
    ]
    columns = COLUMNS + [c for c in conditions.OPTIONAL if units and all(c in u for u in units)]
    acc = pd.DataFrame([{c: u[c] for c in columns} for u in units], columns=columns)
    if any(u.get(NOT_ADAPTED) for u in units):
        acc[NOT_ADAPTED] = [",".join(u.get(NOT_ADAPTED, {})) for u in units]
    atomic_write(tdir / "accuracies.csv", acc.to_csv(index=False).encode())
    tables = [read_table(unit_paths(tdir, u["subsample"])[1]) for u in units]
    if tables:
        atomic_write(
            tdir / "probabilities.parquet", pd.concat(tables, ignore_index=True).to_parquet(index=False)
        )
    return acc


def exposure_tests(root: str | Path) -> pd.DataFrame:
    """The exposure tests of every finished unit under root that ran them: one row per unit and
    condition (m, n, model, task, subsample, condition, calibrated, and per statistic its effect and
    the p-values of both sides); empty where no unit did."""
    rows = []
    for path in sorted(Path(root).rglob("units/[0-9]*.json")):
        match = UNIT_LAYOUT.search(path.as_posix())
        unit = read_unit(path) if match else {}
        for cond, test in unit.get("exposure", {}).get("tests", {}).items():
            m, n, model, task, k = match.groups()
            row = {"m": int(m), "n": int(n), "model": model, "task": task, "subsample": int(k)}
            row |= {"condition": cond, "calibrated": test["calibrated"], "alpha": test["alpha"]}
            for stat, r in test.items():  # every statistic the unit recorded (a dict with its p-values)
                if isinstance(r, dict) and "p_test" in r:
                    row |= {f"{stat}_{key}": r[key] for key in ("effect", "p_test", "p_extra")}
            rows.append(row)
    return pd.DataFrame(rows)


FIRST_TRAIN_DRAW = "proportional"  # how train was drawn in every unit and adapter before a record named it


def train_draw_of(record: dict) -> str:
    """How a unit's train was drawn: its record's `draw`, else its settings' `train_draw` (recorded only
    where it is not the first draw, so that older units keep their hash), else the first draw."""
    drawn = (record.get("draw") or {}).get("train") or record.get("settings", {}).get("train_draw")
    return drawn or FIRST_TRAIN_DRAW


def damaged(tdir: Path, units: dict[int, dict[str, Any]] | None = None) -> list[str]:
    """The finished units of a task dir whose record disagrees with itself or with what was written beside
    it: settings edited after the run (their hash no longer matches), a per-document table that is not
    whole, accuracies found in no row of its accuracies.csv. Each a line naming the file. `units`: the
    task dir's finished records (`finished`), where the caller read them already."""
    from collections import Counter

    import pyarrow.parquet as pq

    table, units = tdir / "accuracies.csv", finished(tdir) if units is None else units
    rows = pd.read_csv(table) if table.is_file() else pd.DataFrame()
    columns = [c for c in (*COLUMNS, *conditions.OPTIONAL) if c in rows.columns]
    if len(rows) != len(units):  # a stale table is said as such (stale_tables), not row by row
        columns = []

    def key(values) -> tuple:
        return tuple(None if x != x else round(float(x), 9) for x in values)  # NaN: None, equal to itself

    left = Counter(key(row) for row in rows[columns].to_numpy())
    numbered = {int(p.stem) for p in unit_records(tdir)}
    out = [  # a record renamed, or its subsample edited: its number is not its file's
        f"{tdir / 'units'}: a record says subsample {k}, and no units/{k}.json holds it (a record was "
        "edited or renamed)"
        for k in sorted(set(units) - numbered)
    ]
    for k, record in units.items():  # the rows are in no order a reader may rely on: matched whole
        path = unit_paths(tdir, k)[0]
        hashed = "settings_hash" in record  # a record with no hash (made by hand, say) has none to check
        if hashed and fingerprint(record.get("settings", {})) != record["settings_hash"]:
            out.append(f"{path}: its settings were edited after it ran (their hash no longer matches)")
        elif SEAL in record and fingerprint({k: v for k, v in record.items() if k != SEAL}) != record[SEAL]:
            out.append(f"{path}: it was edited after it was written (its {SEAL} no longer matches)")
        drawn = (record.get("draw") or {}).get("train")
        planned = record.get("settings", {}).get("train_draw") or FIRST_TRAIN_DRAW  # hashed, unlike the draw
        if hashed and drawn and drawn != planned:
            out.append(f"{path}: its draw says train {drawn!r}, its settings {planned!r}: it was edited")
        try:
            pq.read_metadata(unit_table(path))
        except Exception as err:  # a cut or edited file: pyarrow's own words
            out.append(f"{unit_table(path)}: not a whole table ({named(err)})")
        mine = key(float(record.get(c, float("nan"))) for c in columns)
        if columns and left[mine] > 0:
            left[mine] -= 1
        elif columns:
            said = ", ".join(f"{c} {record.get(c)}" for c in columns[:4])
            out.append(f"{path}: its accuracies ({said}) are in no row of {table}")
    return out
