"""Where each file of the results layout lives, what its columns are, and the writes that keep a file
whole (each atomic: a file is either old or complete)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.core.design import conditions
from harness.core.plumbing.errors import UserError, read_json_object, storage_problem

COLUMNS = [*conditions.PAIRED, "majority", "num_classes", "majority_all"]


LAYOUT = re.compile(r"m(\d+)/n(\d+)/([^/]+)/([^/]+)/accuracies\.csv$")


UNITS = "m*/n*/*/*/units/[0-9]*.json"


UNIT_LAYOUT = re.compile(r"m(\d+)/n(\d+)/([^/]+)/([^/]+)/units/(\d+)\.json$")


PROVENANCE = ("seconds", "base_from", "code")  # how a unit was computed, not what: shards may differ in them
SEAL = "record_hash"  # a unit record's hash of all else in it, taken as it is written: an edit shows


CALIBRATION = "calibration.json"  # `contamination calibrate`'s error rates, beside its per-mode grids


# a unit's conditions whose model is not an adaptation ({condition: why}); accuracies.csv's column of the
# same name lists them (comma-separated), and every effect leaves those rows out
NOT_ADAPTED = "not_adapted"

# a unit record's planted-leak control: each adapted condition's steps and tokens read, and each condition's
# log p of every test document's gold answer (the manipulation check); stats/summary/control.py reads it
CONTROL = "control"


# the share of a unit's test documents in their most frequent class: the study's `majority` (experiment.py:
# df_test["label"].value_counts(normalize=True).max()), read from probabilities.parquet by `collect`, so
# that it holds for units written before accuracies.csv's `majority` took that meaning (2026-12-06)
TEST_MAJORITY = "test_majority"


# the conditions whose model gave every test document of the unit one class, where the gold labels are not
# all that class, with the class ('extra=2,test=2'; read from probabilities.parquet by `collect`; None
# where no probabilities were recorded): a bias between two models of one class says nothing of the method
ONE_CLASS = "one_class"


def model_dir(out: str | Path, m: int, n: int, model_tag: str) -> Path:
    return Path(out) / f"m{m}" / f"n{n}" / model_tag


def task_dir(mdir: Path, folder: str) -> Path:
    """A task's folder in a model folder (`folder`: the task's folder name, harness.tasks' folder_name)."""
    return Path(mdir) / folder


def screen_path(out: str | Path, m: int, n: int, base: str) -> Path:
    """A zero-shot plan's screen of its tasks (harness.study.screen), one per cell and base, beside the
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


def manifests(mdir: Path) -> list[dict[str, Any]]:
    """A model folder's run manifests (each run's config, code, versions and finished units)."""
    fix = (
        "restore it from where the run wrote it (a copy, version control): it records the run's plan, code "
        "and config, and a confirmatory run read without it is exploratory; where none is left, delete it "
        "(the next run into this folder writes a new one, without that history)"
    )
    return [read_json_object(p, str(p), fix) for p in manifest_paths(mdir)]


def model_manifests(root: str | Path) -> list[Path]:
    """Every run manifest of every model folder under a results root."""
    return sorted(Path(root).glob("m*/n*/*/manifest-shard*.json"))


def adapter_path(tdir: Path, subsample: int, cond: str) -> Path:
    """Where `run --keep-adapters` keeps a unit's adapter of one condition, beside its units."""
    return tdir / "adapters" / f"{subsample}_{cond}"


ADAPTER_RECORD = "tapt.json"  # what every adapter or model folder tapt-bench writes holds: what made it


def adapter_record_path(folder: str | Path) -> Path:
    """The record beside an adapter or model folder tapt-bench wrote: its draw, settings and files."""
    return Path(str(folder)).expanduser() / ADAPTER_RECORD


def report_path(root: str | Path) -> Path:
    """`tapt-bench report`'s page of a results folder, by default."""
    return Path(root) / "report.html"


def exchangeability_path(root: str | Path) -> Path:
    """`contamination calibrate`'s exchangeability p-values, at the results folder's top."""
    return Path(root) / "exchangeability.json"


def pilot_path(out: str | Path) -> Path:
    """Every number a pilot read (`tapt-bench pilot`), in its results folder."""
    return Path(out) / "pilot.json"


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
        kind = "a file" if existing.is_file() else "a device or a pipe"
        return f"{existing} is {kind}, not a folder: name a folder for the results"
    try:
        os.rmdir(tempfile.mkdtemp(dir=existing, prefix=".tapt-bench-probe-"))
    except OSError as err:
        return f"cannot create a folder in {existing} ({err.strerror}): name a folder you can write to"
    return None


def atomic_write(path: Path, data: bytes) -> None:
    """Write via a temporary file and rename, so `path` is either old or complete, never partial. A path
    that exists and is not a regular file (a device, a FIFO) is refused: the rename would replace it."""
    if path.exists() and not path.is_file() and not path.is_dir():  # a folder: the rename's own error says it
        raise UserError(f"{path} exists and is not a regular file (a device or a pipe): name a file to write")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):  # a read-only folder refuses even this: the write's error counts
            tmp.unlink(missing_ok=True)  # no stray temporary file beside the output
        if isinstance(err, OSError):  # a full disk, a file-size limit, a folder made read-only: said
            fix = storage_problem(err) or (
                f"{err.strerror or type(err).__name__}: free the disk or fix the folder's permissions"
            )
            raise UserError(
                f"cannot write {path}: {fix}; it is as it was before this write, and everything written "
                "before it is kept: then run the same command again"
            ) from err
        raise


def read_table(path: Path):
    """A parquet table the grid wrote, or one line naming it and how to rebuild it (a file cut short, or
    edited, is no table)."""
    import pandas as pd

    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        unit = path.parent.name == UNITS.split("/")[-2]
        fix = (
            f"delete it and {path.with_suffix('.json').name} beside it, then rerun the grid with the same "
            "config and --out: it computes that unit again"
            if unit
            else "delete it, then rerun the grid with the same config and --out: it rebuilds the table from "
            "the unit records in units/"
        )
        raise UserError(f"{path}: not a readable table ({type(err).__name__}); {fix}") from None


def file_problem(path: str | Path, example: str = "report.html") -> str | None:
    """Why a file cannot be written at `path` (None when it can): it is a folder (a file in it named
    `example` is suggested), not a regular file, or its folder cannot be made or written."""
    path = Path(path)
    if path.is_dir():
        return f"{path} is a folder: name a file, such as {path / example}"
    if path.exists() and not path.is_file():
        return f"{path} exists and is not a regular file (a device or a pipe): name a file to write"
    return folder_problem(path.parent)


WRITTEN_BY = "tapt-bench"  # a JSON result's mark: a file a later --out may replace


def json_output_problem(path: str | Path, example: str, older: tuple[set[str], ...] = ()) -> str | None:
    """Why a JSON result cannot be written at `path` (None where it can): file_problem's reasons, or a file
    there that is not a result of ours (its mark, or keys that results written before the mark hold:
    `older`), which a write would replace."""
    path = Path(path)
    problem = file_problem(path, example)
    if problem or not path.is_file():
        return problem
    try:
        found = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        found = None
    ours = isinstance(found, dict) and (
        found.get("written_by") == WRITTEN_BY or any(keys <= set(found) for keys in older)
    )
    return (
        None
        if ours
        else f"{path} exists and is not a result tapt-bench wrote: name another file, or remove it"
    )


def write_json(path: Path, value: Any) -> None:
    atomic_write(path, json.dumps(value, indent=1).encode())


def unit_table(record: Path) -> Path:
    """The per-document table beside a unit's record (units/<k>.json -> units/<k>.parquet)."""
    return Path(record).with_suffix(".parquet")


def unit_paths(tdir: Path, subsample: int) -> tuple[Path, Path]:
    """(the unit's record, its per-example table)."""
    return tdir / "units" / f"{subsample}.json", tdir / "units" / f"{subsample}.parquet"


def null_model_path(tdir: Path, subsample: int) -> Path:
    """calibrate's null model of one unit (its exposure scores and training record), beside the unit."""
    return tdir / "null" / f"{subsample}.json"
