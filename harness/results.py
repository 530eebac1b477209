"""The results layout (the study's), written and read here only; every write is atomic.

    <out>/m<m>/n<n>/<model-tag>/<task>/accuracies.csv         one row per subsample, in index order
    <out>/m<m>/n<n>/<model-tag>/<task>/probabilities.parquet  per-example class probabilities
    <out>/m<m>/n<n>/<model-tag>/<task>/units/<k>.json|.parquet one finished (task, subsample) unit
    <out>/m<m>/n<n>/<model-tag>/manifest-shard<i>of<N>.json    a run's config, versions, finished units
    <out>/m<m>/n<n>/<model-tag>/logs/run-<time>-shard<i>of<N>.log
    <out>/m<m>/n<n>/<model-tag>/.lock-shard<i>of<N>            the run writing that shard (grid/lock.py)

A unit's .json (its record) is written last, after its .parquet, and marks it finished; the two
tables are rebuilt from the finished units, so a killed run loses at most the unit in flight.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.core import conditions
from harness.core.errors import UserError, read_json_object

COLUMNS = [*conditions.PAIRED, "majority", "num_classes", "majority_all"]
OPTIONAL = list(conditions.OPTIONAL)  # a run with the planted leak adds its column after the study's six
LAYOUT = re.compile(r"m(\d+)/n(\d+)/([^/]+)/([^/]+)/accuracies\.csv$")
UNITS = "m*/n*/*/*/units/*.json"
UNIT_LAYOUT = re.compile(r"m(\d+)/n(\d+)/([^/]+)/([^/]+)/units/(\d+)\.json$")
PROVENANCE = ("seconds", "base_from", "code")  # how a unit was computed, not what: shards may differ in them
CALIBRATION = "calibration.json"  # `contamination calibrate`'s error rates, beside its per-mode grids
# a unit's conditions whose model is not an adaptation ({condition: why}); accuracies.csv's column of the
# same name lists them (comma-separated), and every effect leaves those rows out
NOT_ADAPTED = "not_adapted"
# the conditions whose model gave every test document of the unit one class, where the gold labels are not
# all that class, with the class ('extra=2,test=2'; read from probabilities.parquet by `collect`; None
# where no probabilities were recorded): a bias between two models of one class says nothing of the method
ONE_CLASS = "one_class"
# per unit, the test documents the test model gets right and the extra model wrong, and the reverse
FLIPS = ("flips_test_only", "flips_extra_only")


# ---- writing -----------------------------------------------------------------------------------------


def model_dir(out: str | Path, m: int, n: int, model_tag: str) -> Path:
    return Path(out) / f"m{m}" / f"n{n}" / model_tag


def task_dir(out: str | Path, m: int, n: int, model_tag: str, slug: str) -> Path:
    return model_dir(out, m, n, model_tag) / slug


def screen_path(out: str | Path, m: int, n: int, base: str) -> Path:
    """A zero-shot plan's screen of its tasks (harness.grid.screen), one per cell and base, beside the
    model folders of the cell."""
    return Path(out) / f"m{m}" / f"n{n}" / f"screen-{Path(base.rstrip('/')).name}.json"


def screens(mdir: Path) -> list[dict[str, Any]]:
    """The screens written beside a model folder (in its cell's folder)."""
    return [json.loads(p.read_text()) for p in sorted(mdir.parent.glob("screen-*.json"))]


def manifest_path(mdir: Path, shard: tuple[int, int]) -> Path:
    return mdir / f"manifest-shard{shard[0]}of{shard[1]}.json"


def manifest_paths(mdir: Path) -> list[Path]:
    """Every run manifest of a model folder (manifest_path), in order."""
    return sorted(mdir.glob("manifest-shard*.json"))


def model_manifests(root: str | Path) -> list[Path]:
    """Every run manifest of every model folder under a results root."""
    return sorted(Path(root).glob("m*/n*/*/manifest-shard*.json"))


def adapter_path(tdir: Path, subsample: int, cond: str) -> Path:
    """Where `run --keep-adapters` keeps a unit's adapter of one condition, beside its units."""
    return tdir / "adapters" / f"{subsample}_{cond}"


def report_path(root: str | Path) -> Path:
    """`tapt-bench report`'s page of a results folder, by default."""
    return Path(root) / "report.html"


def calibration_path(root: str | Path) -> Path:
    """`contamination calibrate`'s error rates, at the root of its grids."""
    return Path(root) / CALIBRATION


def lock_path(mdir: Path, shard: tuple[int, int]) -> Path:
    return mdir / f".lock-shard{shard[0]}of{shard[1]}"


def shard_locks(mdir: Path) -> list[Path]:
    """Every shard's lock file in a model folder (lock_path)."""
    return sorted(mdir.glob(".lock-shard*of*"))


def new_log_path(mdir: Path, shard: tuple[int, int]) -> Path:
    return mdir / "logs" / f"run-{time.strftime('%Y%m%d-%H%M%S')}-shard{shard[0]}of{shard[1]}.log"


def folder_problem(path: str | Path) -> str | None:
    """Why results cannot be written under `path` (None when they can): it or a parent is a file, or
    the nearest folder that exists refuses a new folder (probed with an empty one, removed at once)."""
    path = Path(path).absolute()
    existing = next(p for p in [path, *path.parents] if p.exists())
    if not existing.is_dir():
        return f"{existing} is a file, not a folder: name a folder for the results"
    try:
        os.rmdir(tempfile.mkdtemp(dir=existing, prefix=".tapt-bench-probe-"))
    except OSError as err:
        return f"cannot create a folder in {existing} ({err.strerror}): name a folder you can write to"
    return None


def atomic_write(path: Path, data: bytes) -> None:
    """Write via a temporary file and rename, so `path` is either old or complete, never partial."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # a read-only folder refuses even this: the write's error counts
            tmp.unlink(missing_ok=True)  # no stray temporary file beside the output
        raise


def file_problem(path: str | Path) -> str | None:
    """Why a file cannot be written at `path` (None when it can): it is a folder, or its folder cannot
    be made or written."""
    path = Path(path)
    if path.is_dir():
        return f"{path} is a folder: name a file, such as {path / 'report.html'}"
    return folder_problem(path.parent)


def write_json(path: Path, value: Any) -> None:
    atomic_write(path, json.dumps(value, indent=1).encode())


def unit_paths(tdir: Path, subsample: int) -> tuple[Path, Path]:
    """(the unit's record, its per-example table)."""
    return tdir / "units" / f"{subsample}.json", tdir / "units" / f"{subsample}.parquet"


def null_model_path(tdir: Path, subsample: int) -> Path:
    """calibrate's null model of one unit (its exposure scores and training record), beside the unit."""
    return tdir / "null" / f"{subsample}.json"


def is_done(tdir: Path, subsample: int) -> bool:
    return unit_paths(tdir, subsample)[0].is_file()


def read_unit(path: Path) -> dict[str, Any]:
    """One unit's record; a file that is not one (cut short, edited) is named, with the fix."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(
            f"{path}: not a readable unit record ({type(err).__name__}: {err}); delete it and its "
            f"{Path(path).with_suffix('.parquet').name} to recompute that unit (rerun the grid)"
        ) from None
    if not isinstance(record, dict) or not isinstance(record.get("subsample"), int):
        raise UserError(
            f"{path}: not a unit record (no subsample index); delete it and its "
            f"{Path(path).with_suffix('.parquet').name} to recompute that unit (rerun the grid)"
        )
    return record


def unit_records(tdir: Path) -> list[Path]:
    """The unit records of a task dir (unit_paths), in order."""
    return sorted((tdir / "units").glob("*.json"))


def null_records(tdir: Path) -> list[Path]:
    """calibrate's null models of a task dir (null_model_path), in order."""
    return sorted((tdir / "null").glob("*.json"))


def task_dirs(mdir: Path) -> list[Path]:
    """The task folders of a model folder that hold units."""
    return [tdir for tdir in sorted(mdir.iterdir()) if (tdir / "units").is_dir()]


def any_unit(mdir: Path) -> Path | None:
    """A unit record of a model folder (its first), None where it has none."""
    return next(iter(sorted(mdir.glob("*/units/*.json"))), None)


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
    data = json.dumps({"subsample": subsample, **accuracies, **record}, indent=1).encode()  # fails first
    atomic_write(table, probs.assign(subsample=subsample).to_parquet(index=False))
    atomic_write(record_path, data)


def rebuild(tdir: Path) -> pd.DataFrame:
    """Rewrite accuracies.csv and probabilities.parquet from the finished units; returns the accuracies."""
    units = list(finished(tdir).values())
    columns = COLUMNS + [c for c in OPTIONAL if units and all(c in u for u in units)]
    acc = pd.DataFrame([{c: u[c] for c in columns} for u in units], columns=columns)
    if any(u.get(NOT_ADAPTED) for u in units):
        acc[NOT_ADAPTED] = [",".join(u.get(NOT_ADAPTED, {})) for u in units]
    atomic_write(tdir / "accuracies.csv", acc.to_csv(index=False).encode())
    tables = [pd.read_parquet(unit_paths(tdir, u["subsample"])[1]) for u in units]
    if tables:
        atomic_write(
            tdir / "probabilities.parquet", pd.concat(tables, ignore_index=True).to_parquet(index=False)
        )
    return acc


# ---- reading -----------------------------------------------------------------------------------------


def read_accuracies(path: Path, n: int) -> pd.DataFrame:
    """One accuracies.csv, checked: readable, all columns, accuracies multiples of 1/n."""
    try:
        df = pd.read_csv(path)
    except Exception as err:  # any parser failure means an unusable file
        raise UserError(f"{path}: unreadable accuracies.csv ({type(err).__name__}: {err})") from err
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise UserError(f"{path}: missing column(s) {missing}; expected {COLUMNS}")
    optional = [c for c in OPTIONAL if c in df.columns]
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
            raise UserError(
                f"{tdir}: {why}: its tables are stale, and reading them would skip units. Rerun the grid "
                "with the same config and --out (it runs nothing finished and rebuilds the tables)"
            )
    frames = []
    for path in sorted(root.rglob("accuracies.csv")):
        match = LAYOUT.search(path.as_posix())
        if not match:
            raise UserError(f"{path}: not in the layout m<m>/n<n>/<model>/<task>/accuracies.csv")
        m, n, model, task = match.groups()
        df = read_accuracies(path, int(n))
        ks, one, flips = unit_classes(path.parent / "probabilities.parquet", len(df))
        frames.append(
            df.assign(m=int(m), n=int(n), model=model, task=task, subsample=ks, **{ONE_CLASS: one}, **flips)
        )
    if not frames:
        raise UserError(f"{root}: no accuracies.csv found (expected m<m>/n<n>/<model>/<task>/accuracies.csv)")
    return pd.concat(frames, ignore_index=True)


def unit_classes(probs_path: Path, rows: int) -> tuple[list[int], list[str | None], dict[str, list]]:
    """Each accuracies.csv row's subsample, its collapsed conditions (ONE_CLASS) and its flips (FLIPS),
    from the probabilities the same rebuild wrote (its units in the same order). A table that holds
    other units is an error naming it; accuracies alone (made elsewhere, without unit records) give row
    numbers and None: the collapse could not be checked."""
    if not probs_path.is_file():  # beside unit records, collect refused it first (stale_tables)
        return list(range(rows)), [None] * rows, {c: [np.nan] * rows for c in FLIPS}
    probs = pd.read_parquet(probs_path)
    ks = [int(k) for k in pd.unique(probs["subsample"])]
    if len(ks) != rows:
        raise UserError(
            f"{probs_path}: holds {len(ks)} units and its accuracies.csv {rows}: the two tables disagree; "
            "rerun the grid into the same --out to rebuild both from the finished units"
        )
    units = [group for _, group in predicted(probs).groupby("subsample", sort=False)]
    flipped = [flips(u) for u in units]
    return ks, [collapsed(u) for u in units], {c: [f[c] for f in flipped] for c in FLIPS}


def flips(unit: pd.DataFrame) -> dict[str, float]:
    """A unit's test documents that the test model gets right and the extra model wrong, and the
    reverse: where a bias comes from (NaN where the unit has no test or extra model)."""
    if not {"row", "correct"} <= set(unit.columns):  # a table written without them: no flips to count
        return dict.fromkeys(FLIPS, np.nan)
    right = unit.pivot_table(index="row", columns="condition", values="correct", aggfunc="first")
    if not {conditions.TEST, conditions.EXTRA} <= set(right.columns):
        return dict.fromkeys(FLIPS, np.nan)
    test, extra = right[conditions.TEST].astype(bool), right[conditions.EXTRA].astype(bool)
    return {FLIPS[0]: float((test & ~extra).sum()), FLIPS[1]: float((extra & ~test).sum())}


ONE_ANSWER = 0.5  # a generative model that gives one answer to more than this share of test is collapsed


def answer_id(answer: str) -> int:
    """A generated answer as a number (ONE_CLASS holds numbers): equal answers, equal numbers."""
    return int(hashlib.sha256(answer.encode()).hexdigest()[:8], 16)


def collapsed(unit: pd.DataFrame) -> str:
    """A unit's collapsed models as 'condition=class,...': each condition whose model gives every test
    document one class where the gold labels are not all that class (a model right on a test split of
    one class is not collapsed). A generative task's twin: a model whose extracted answer (or no answer)
    is the same on over ONE_ANSWER of test, where the gold answers are not so (its class: answer_id)."""
    out = []
    for cond in conditions.ALL:
        rows = unit[unit["condition"] == cond]
        if not len(rows):
            continue
        if "gold" in rows:  # generative
            answers, gold = rows["answer"].fillna("").astype(str), rows["gold"].astype(str)
            top, share = answers.value_counts().index[0], answers.value_counts().iloc[0] / len(rows)
            if share > ONE_ANSWER and gold.value_counts().iloc[0] / len(rows) <= ONE_ANSWER:
                out.append(f"{cond}={answer_id(top)}")
            continue
        classes = set(rows["pred"])
        gold = set(rows["label"]) if "label" in rows else set()  # a table without labels: unknown
        if len(classes) == 1 and gold != classes:
            out.append(f"{cond}={classes.pop()}")
    return ",".join(out)


def collapsed_classes(value: str | None) -> dict[str, int]:
    """ONE_CLASS read back: {condition: the class its model gave every document}."""
    if not isinstance(value, str) or not value:
        return {}
    pairs = (item.partition("=") for item in value.split(","))
    return {cond: int(cls) for cond, _, cls in pairs if cls}


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
        path.parent.relative_to(root).as_posix(): pd.read_parquet(path)
        for path in sorted(Path(root).rglob("probabilities.parquet"))
    }


def manifests(mdir: Path) -> list[dict[str, Any]]:
    """A model folder's run manifests (each run's config, code, versions and finished units)."""
    fix = "delete it; the next run into this folder writes it again"
    return [read_json_object(p, str(p), fix) for p in manifest_paths(mdir)]


def model_dirs(root: str | Path) -> dict[tuple[int, int, str], Path]:
    """Every model folder under root (or root itself, a model folder), by (m, n, model)."""
    out = {}
    for path in sorted(Path(root).rglob("accuracies.csv")):
        match = LAYOUT.search(path.as_posix())
        if match:
            m, n, model, _ = match.groups()
            out[(int(m), int(n), model)] = path.parent.parent
    return out


def predictions(root: str | Path) -> dict[str, pd.DataFrame]:
    """Per task folder under root, by its path from root (a model folder's: the task's name; a higher
    root's: `m<m>/n<n>/<model>/<task>`): the predicted class of every test document (rows: subsample,
    row; columns: the conditions)."""
    out = {}
    for path in sorted(Path(root).rglob("probabilities.parquet")):
        probs = pd.read_parquet(path)
        out[path.parent.relative_to(root).as_posix()] = predicted(probs).pivot_table(
            index=["subsample", "row"], columns="condition", values="pred", aggfunc="first"
        )
    return out


def predicted(probs: pd.DataFrame) -> pd.DataFrame:
    """The probabilities with each document's predicted class (`pred`: the most probable; a generative
    task's: its extracted answer)."""
    if "answer" in probs:
        return probs.assign(pred=probs["answer"].fillna("").astype(str))
    return probs.assign(pred=probs["probs"].map(np.argmax))


def exposure_tests(root: str | Path) -> pd.DataFrame:
    """The exposure tests of every finished unit under root that ran them: one row per unit and
    condition (m, n, model, task, subsample, condition, calibrated, and per statistic its effect and
    the p-values of both sides); empty where no unit did."""
    rows = []
    for path in sorted(Path(root).rglob("units/*.json")):
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


def calibration(root: str | Path) -> dict | None:
    """The detectors' error rates of `contamination calibrate` in root or its parent (root being one
    mode's grid), None where there are none."""
    for folder in (Path(root), Path(root).parent):
        path = calibration_path(folder)
        if path.is_file():
            fix = "delete it, or rerun `tapt-bench contamination calibrate` to write it again"
            return read_json_object(path, f"{path} (the detectors' error rates)", fix)
    return None
