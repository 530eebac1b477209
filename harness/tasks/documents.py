"""Documents of a task outside the subsample design: a whole split (what a released checkpoint may have
been adapted on) and a file of the user's own documents in the task's format, rendered by the task's
own prompt into the columns every stage reads (`text`, `label`, `row`, `prompt`, `choices`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.errors import UserError
from harness.tasks import prompts
from harness.tasks.data import apply_filters, load_pool, read_local, to_canonical
from harness.tasks.lm_eval_spec import LmEvalSpec
from harness.tasks.spec import TaskSpec

FILE_SUFFIXES = (".csv", ".jsonl", ".parquet")
LM_EVAL_SPLITS = {"test": "test_split", "validation": "validation_split", "train": "training_split"}


def rendered(spec: TaskSpec, docs: pd.DataFrame) -> pd.DataFrame:
    """A tapt_* task's `text`/`label` rows with their zero-shot prompt and the task's classes."""
    return docs.assign(
        prompt=[prompts.zero_shot(spec, t) for t in docs["text"]], choices=[list(spec.classes)] * len(docs)
    )


def split_names(spec: TaskSpec | LmEvalSpec) -> list[str]:
    """The splits a task offers: an lm-eval task's test/validation/train where its YAML names them; a
    tapt_* task's one pool, by its hub split's name."""
    if isinstance(spec, TaskSpec):
        return [spec.hub_split]
    return [role for role, key in LM_EVAL_SPLITS.items() if getattr(spec.task.config, key, None)]


def split_docs(spec: TaskSpec | LmEvalSpec, split: str, data_dir: str | None) -> pd.DataFrame:
    """Every document of one split of the task, in source order (`row`: its position)."""
    names = split_names(spec)
    if split not in names:
        fix = "" if isinstance(spec, LmEvalSpec) else "; a tapt_* task draws from one split"
        raise UserError(
            f"task {spec.task_name} has no split {split!r}: its splits are {names}{fix}; for documents "
            f"of your own, pass a {'/'.join(FILE_SUFFIXES)} file as --reference-file"
        )
    if isinstance(spec, TaskSpec):
        pool = load_pool(spec, data_dir)
        return rendered(spec, pool.assign(row=np.arange(len(pool))))
    task = spec.task
    docs = {"test": task.test_docs, "validation": task.validation_docs, "train": task.training_docs}[split]()
    return spec.frame(docs)


def file_docs(spec: TaskSpec | LmEvalSpec, path: str | Path) -> pd.DataFrame:
    """The documents of a csv/jsonl/parquet file in the task's format: a tapt_* task's text and label
    columns (as its data file has them); an lm-eval task's dataset columns, through its process_docs
    and prompt. Columns and labels are checked before any model runs."""
    path = Path(path)
    if path.suffix not in FILE_SUFFIXES or not path.is_file():
        raise UserError(f"{path}: not a {'/'.join(FILE_SUFFIXES)} file; pass a file of documents of the task")
    raw = read_local(path)
    if raw.empty:
        raise UserError(f"{path}: no rows; the file needs one document per row")
    if isinstance(spec, TaskSpec):
        df = apply_filters(spec, to_canonical(spec, raw, str(path)))
        fields = [spec.text_field] if isinstance(spec.text_field, str) else list(spec.text_field)
        missing = [c for c in ("text", "label") if c not in df.columns]
        if missing:
            raise UserError(
                f"{path}: missing column(s) for task {spec.task_name}: needs "
                f"{[*fields, spec.label_field]} or text and label; it has {list(raw.columns)}"
            )
        empty = df["text"].isna() | (df["text"].astype(str).str.strip() == "")
        if empty.any():
            raise UserError(f"{path}: {int(empty.sum())} empty text(s), first at row {int(empty.argmax())}")
        docs = pd.DataFrame({"text": df["text"].astype(str), "label": df["label"].astype("int64")})
        return rendered(spec, docs.assign(row=np.arange(len(docs))))
    return lm_eval_file_docs(spec, raw, path)


def lm_eval_file_docs(spec: LmEvalSpec, raw: pd.DataFrame, path: Path) -> pd.DataFrame:
    import datasets

    task = spec.task
    split = task.config.test_split or task.config.validation_split
    expected = list(task.dataset[split].column_names)
    missing = [c for c in expected if c not in raw.columns]
    if missing:
        raise UserError(
            f"{path}: missing column(s) {missing} of task {spec.task_name}; its documents have the columns "
            f"{expected} (those of its {split!r} split); the file has {list(raw.columns)}"
        )
    docs = datasets.Dataset.from_pandas(raw[expected], preserve_index=False)
    if callable(task.config.process_docs):
        docs = task.config.process_docs(docs)
    try:
        return spec.frame(docs)
    except Exception as err:  # the task's own prompt or target functions rejected a row
        raise UserError(
            f"{path}: task {spec.task_name}'s prompt could not render a row ({type(err).__name__}: {err}); "
            "check the file's values against the task's documents"
        ) from err


def sample(docs: pd.DataFrame, n: int | None, seed: int, what: str) -> pd.DataFrame:
    """A seeded sample of n documents (in source order), or all of them where n is None."""
    if n is None:
        return docs
    if n > len(docs):
        raise UserError(f"{what}: n = {n} exceeds its {len(docs)} documents; lower it or leave it unset")
    rows = np.sort(np.random.default_rng([seed, 3]).choice(len(docs), size=n, replace=False))
    return docs.iloc[rows].reset_index(drop=True)
