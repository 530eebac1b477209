"""Documents of a task outside the subsample design: a whole split (what a released checkpoint may have
been adapted on) and a file of the user's own documents in the task's format, rendered by the task's
own prompt into the columns every stage reads (`text`, `label`, `row`, `prompt`, `choices`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from harness.core.design import seeds
from harness.core.plumbing.errors import UserError
from harness.tasks.data import read_local

if TYPE_CHECKING:
    from harness.tasks.protocol import Spec

FILE_SUFFIXES = (".csv", ".jsonl", ".parquet")


def split_docs(spec: Spec, split: str, data_dir: str | None) -> pd.DataFrame:
    """Every document of one split of the task, in source order (`row`: its position)."""
    names = spec.split_names()
    if split not in names:
        raise UserError(
            f"task {spec.task_name} has no split {split!r}: its splits are {names}; for documents "
            f"of your own, pass a {'/'.join(FILE_SUFFIXES)} file as --reference-file"
        )
    return spec.split_docs(split, data_dir)


def file_docs(spec: Spec, path: str | Path) -> pd.DataFrame:
    """The documents of a csv/jsonl/parquet file in the task's format: a tapt_* task's text and label
    columns (as its data file has them); an lm-eval task's dataset columns, through its process_docs
    and prompt. Columns and labels are checked before any model runs."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file; pass an existing {'/'.join(FILE_SUFFIXES)} file of documents")
    if path.suffix not in FILE_SUFFIXES or not path.is_file():
        raise UserError(f"{path}: not a {'/'.join(FILE_SUFFIXES)} file; pass a file of documents of the task")
    raw = read_local(path)
    if raw.empty:
        raise UserError(f"{path}: no rows; the file needs one document per row")
    docs = spec.file_docs(raw, path)
    counts = docs["choices"].map(len).to_numpy()
    labels = docs["label"].to_numpy()
    bad = (labels < 0) | (labels >= counts)
    if bad.any():
        i = int(bad.argmax())
        raise UserError(
            f"{path}: row {i}: label {labels[i]} is not one of the task's {counts[i]} classes (0 to "
            f"{counts[i] - 1}: {list(docs['choices'].iloc[i])}); {int(bad.sum())} row(s) like it; fix the "
            "labels (0-indexed in the task's class order)"
        )
    return docs


def sample(docs: pd.DataFrame, n: int | None, seed: int, what: str) -> pd.DataFrame:
    """A seeded sample of n documents (in source order), or all of them where n is None."""
    if n is None:
        return docs
    if n > len(docs):
        raise UserError(f"{what}: n = {n} exceeds its {len(docs)} documents; lower it or leave it unset")
    rows = np.sort(seeds.rng(seed, 0, "sample").choice(len(docs), size=n, replace=False))
    return docs.iloc[rows].reset_index(drop=True)
