"""A TAPT run's output dir: staged, then moved into place on success, with its tapt.json."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.core.errors import UserError
from harness.core.provenance import library_versions


@contextmanager
def staged(out: Path, overwrite: bool) -> Iterator[Path]:
    """A fresh dir beside `out` to write into; moved into place only if the block succeeds.

    Refuses an existing `out` unless `overwrite`; an old `out` survives any failure.
    """
    if out.exists() and not overwrite:
        raise UserError(f"output {out} exists; pass --overwrite to replace it")
    if out.exists():
        refuse_foreign(out)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(tmp / "trainer", ignore_errors=True)  # the Trainer's scratch dir
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)


RECORD = "tapt.json"  # what every output dir of tapt-bench holds: what made it


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
