"""A TAPT run's output dir: staged, then moved into place on success, with its tapt.json."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.core.plumbing.errors import UserError
from harness.core.plumbing.provenance import library_versions
from harness.results.paths import ADAPTER_RECORD


@contextmanager
def staged(out: Path, overwrite: bool) -> Iterator[Path]:
    """A fresh folder beside `out` to write into (its own: a new name, made here); on success its files go
    into `out`. A new `out` is that folder renamed. An existing one (with `overwrite`, and tapt-bench's
    own) gets the new files by name and loses only the files its record lists that are not written again:
    a user's notes or an lm_eval output folder kept beside an adapter stay. Refuses an existing `out`
    without `overwrite`; an old `out` survives any failure."""
    out = Path(os.path.abspath(os.path.expanduser(out)))  # `.` and `..` by their names
    if not out.name:
        raise UserError(f"output {out} is the file system's root: name a folder for the output")
    if out.exists():
        refuse_foreign(out)  # first: --overwrite is offered only where it would be taken
    if out.exists() and not overwrite:
        raise UserError(f"output {out} exists; pass --overwrite to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        yield tmp
        shutil.rmtree(tmp / "trainer", ignore_errors=True)  # the Trainer's scratch dir
        written = list_files(tmp)
        if (tmp / RECORD).is_file():  # the record names what was written: the next --overwrite's list
            record = json.loads((tmp / RECORD).read_text())
            (tmp / RECORD).write_text(json.dumps({**record, "files": written}, indent=2))
        if out.exists():
            replace_files(tmp, out, written)
        else:
            tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def list_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def replace_files(new: Path, out: Path, written: list[str]) -> None:
    """`new`'s files into `out` by name, the record last; the files `out`'s record wrote and `new` does not
    write again removed. Nothing else in `out` is touched."""
    try:
        before = json.loads((out / RECORD).read_text()).get("files", [])
    except (OSError, ValueError, AttributeError):
        before = []
    inside = out.resolve()
    for name in set(before) - set(written) if isinstance(before, list) else ():
        path = (out / str(name)).resolve()
        if path.is_file() and inside in path.parents:  # never outside `out`, whatever the record says
            path.unlink()
    for name in sorted(written, key=lambda n: n == RECORD):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        os.replace(new / name, out / name)


RECORD = ADAPTER_RECORD  # what every output dir of tapt-bench holds: what made it


def refuse_foreign(out: Path) -> None:
    """--overwrite replaces only a folder tapt-bench wrote (its tapt.json) or an empty one."""
    if out.is_dir() and ((out / RECORD).is_file() or not any(out.iterdir())):
        return
    what = "a file" if not out.is_dir() else f"a folder tapt-bench did not write (no {RECORD} in it)"
    raise UserError(
        f"output {out} is {what}; --overwrite replaces only tapt-bench's own output: name another --out, "
        "or remove it yourself"
    )


def write_record(out_dir: Path, record: dict[str, Any]) -> None:
    (out_dir / RECORD).write_text(json.dumps({**record, "versions": library_versions()}, indent=2))
