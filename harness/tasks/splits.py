"""The documents of one subsample's splits, with the zero-shot prompt and the choices every stage
reads: of a tapt_* task (its pool from its data, the prompt of harness/tasks/prompts.py) or of any lm-eval
multiple-choice task (its own docs and prompt)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from harness.core.errors import TaskError
from harness.core.settings import option
from harness.tasks import prompts
from harness.tasks.data import load_pool
from harness.tasks.documents import rendered
from harness.tasks.lm_eval_spec import LmEvalSpec, load_lm_eval_spec
from harness.tasks.spec import TaskSpec, load_spec
from harness.tasks.subsample import SPLITS, SampleSettings, Subsample, draw, draw_eval, stratified_counts

Spec = TaskSpec | LmEvalSpec


@dataclass(kw_only=True)
class SplitSettings(SampleSettings):
    """One split of one subsample of a task."""

    MINIMUM = {"subsample": 0}

    task: str = option(
        help="task slug (ag_news), task name (tapt_ag_news), a task YAML path, or any lm-eval "
        "multiple-choice task (arc_easy, or one in --include-path)"
    )
    split: Literal["train", "extra", "test"] = option("test", "which split of the subsample")
    subsample: int = option(0, "index of the seeded subsample")

    def docs(self) -> tuple[Spec, pd.DataFrame]:
        """The task's spec and the docs of this split."""
        spec = find_spec(self.task, self.include_path)
        return spec, subsample_docs(spec, self, self.subsample)[self.split]


def find_spec(task: str, include_path: Sequence[str] = ()) -> Spec:
    """A tapt_* task by slug, name or YAML path; else any lm-eval multiple-choice task by name."""
    try:
        return load_spec(task, include_path)
    except TaskError as err:
        if task.endswith(".yaml") or not str(err).startswith("unknown task"):
            raise
        spec = load_lm_eval_spec(task, include_path)
        if spec is None:
            raise TaskError(f"{err}; nor is it a task lm-eval knows (`lm_eval ls tasks`)") from None
        return spec


def draw_pool(pool: pd.DataFrame, sample: SampleSettings, subsample: int) -> Subsample:
    """A tapt_* task's subsample of its pool (labels 0..K-1)."""
    return draw(pool["label"].to_numpy(), subsample, sample.m, sample.n, sample.seed)


def draw_rows(spec: Spec, sample: SampleSettings, subsample: int) -> Subsample:
    """The pool rows of one subsample's splits (for an lm-eval task, train's rows are its training
    split's): a TaskError where the pool is too small for the design."""
    if isinstance(spec, TaskSpec):
        return draw_pool(load_pool(spec, sample.data_dir), sample, subsample)
    pool = spec.pool()
    labels = pool["label"].to_numpy() if spec.classes is not None else None
    rows = draw_eval(labels, subsample, sample.n, sample.seed, size=len(pool))
    train = spec.training_pool()
    if train is None:
        return rows
    if sample.m > len(train):
        raise TaskError(
            f"task {spec.task_name}: m = {sample.m} exceeds its {len(train)} training docs; lower m"
        )
    rng = np.random.default_rng([sample.seed, subsample, 2])
    per_class = np.bincount(train["label"], minlength=len(spec.classes or ()))
    if spec.classes is None or sample.m < len(per_class) or not per_class.all():
        picked = rng.choice(len(train), size=sample.m, replace=False)  # too few to stratify: uniform
    else:
        counts = stratified_counts(per_class, sample.m)
        picked = np.concatenate(
            [
                rng.choice(np.flatnonzero(train["label"] == c), size=k, replace=False)
                for c, k in enumerate(counts)
            ]
        )
    return Subsample(train=np.sort(picked), extra=rows.extra, test=rows.test)


def subsample_docs(spec: Spec, sample: SampleSettings, subsample: int) -> dict[str, pd.DataFrame]:
    """train/extra/test docs: columns `text`, `label`, `row` (pool position), `prompt` (no answer),
    `choices` (what lm-eval scores after the prompt, each after the task's target delimiter)."""
    if isinstance(spec, LmEvalSpec):
        sub = draw_rows(spec, sample, subsample)
        train = spec.training_pool()
        pools = {
            "train": train if train is not None else spec.pool().iloc[:0],
            "extra": spec.pool(),
            "test": spec.pool(),
        }
        return {s: pools[s].iloc[sub.rows(s)].reset_index(drop=True) for s in SPLITS}
    pool = load_pool(spec, sample.data_dir)  # read once: drawn from, then indexed
    sub = draw_pool(pool, sample, subsample)
    out = {}
    for split in SPLITS:
        rows = sub.rows(split)
        out[split] = rendered(spec, pool.iloc[rows].assign(row=rows).reset_index(drop=True))
    return out


def answer_delimiter(spec: Spec) -> str:
    """What lm-eval puts between the prompt and a choice: the task's target_delimiter."""
    return spec.target_delimiter if isinstance(spec, LmEvalSpec) else prompts.ANSWER_DELIMITER


def answered(spec: Spec, docs: pd.DataFrame) -> list[str]:
    """Each doc's prompt followed by its gold choice, exactly the continuation lm-eval scores for it."""
    gold = [c[int(y)] for c, y in zip(docs["choices"], docs["label"])]
    return [p + answer_delimiter(spec) + g for p, g in zip(docs["prompt"], gold)]


def labeled_text(spec: Spec, text: str, choice: str) -> str:
    """A text with its answer, as a block of a packed sequence or of a labeled-data contaminator."""
    if isinstance(spec, LmEvalSpec):
        return text + spec.target_delimiter + choice
    return prompts.labeled(text, choice)


def packed(spec: Spec, docs: pd.DataFrame, answers: bool) -> str:
    """One packing sequence of these docs: the task's preamble once (the tapt_* instruction, or an
    lm-eval task's description), then each doc's text (with its gold choice when `answers`)."""
    if isinstance(spec, TaskSpec):
        return prompts.packed(spec, list(docs["text"]), [int(y) for y in docs["label"]] if answers else None)
    if not answers:  # a split without answers may come without its label column
        return spec.description + "\n\n".join(docs["text"])
    gold = [c[int(y)] for c, y in zip(docs["choices"], docs["label"])]
    blocks = [labeled_text(spec, t, g) for t, g in zip(docs["text"], gold)]
    return spec.description + "\n\n".join(blocks)
