"""The design's view of a task (the `Spec` protocol, which a tapt_* task's TaskSpec and any lm-eval
multiple-choice task's LmEvalSpec implement) and the documents of one subsample's splits, with the
zero-shot prompt and the choices every stage reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import pandas as pd

from harness.core.plumbing.errors import TaskError, UnknownTaskError
from harness.core.plumbing.settings import option
from harness.tasks.generative import Answering
from harness.tasks.lm_eval_spec import load_lm_eval_spec
from harness.tasks.spec import load_spec
from harness.tasks.subsample import SampleSettings, Subsample


class Spec(Protocol):
    """A task as the design reads it; no stage asks which kind of task it has.

    Documents are frames with the columns `text`, `label` (gold index), `row` (pool position), `prompt`
    (the zero-shot context lm-eval scores the choices after) and `choices`."""

    slug: str  # its results folder
    task_name: str  # lm-eval's name for it
    classes: tuple[str, ...] | None  # the choices, where every document has the same
    target_delimiter: str  # what lm-eval puts between the prompt and a choice
    generative: bool  # the model generates its answer (generate_until); its gold answer is its one choice
    answering: Answering | None  # a generative task's generation and filter (harness.tasks.generative)

    def draw_rows(self, sample: SampleSettings, subsample: int) -> Subsample:
        """The pool rows of one subsample's splits; a TaskError where the pool is too small."""

    def subsample_docs(self, sample: SampleSettings, subsample: int) -> dict[str, pd.DataFrame]:
        """train/extra/test documents of one subsample."""

    def pool_majority(self, sample: SampleSettings) -> float:
        """The share of the pool's most frequent gold answer (the study's `majority_all`)."""

    def pool_docs(self, sample: SampleSettings) -> pd.DataFrame:
        """Every document the draw draws from, in pool order."""

    def labeled_text(self, text: str, choice: str) -> str:
        """A text with its answer, as a block of a packed sequence or of a labeled-data contaminator."""

    def packed(self, docs: pd.DataFrame, answers: bool) -> str:
        """One packing sequence: the task's preamble once, then each doc's text (with its gold choice
        when `answers`)."""

    def split_names(self) -> list[str]:
        """The whole splits the task offers (test, validation, train; a tapt_* task's one pool)."""

    def split_docs(self, split: str, data_dir: str | None) -> pd.DataFrame:
        """Every document of one of split_names(), in source order."""

    def file_docs(self, raw: pd.DataFrame, path: Path) -> pd.DataFrame:
        """A file of the user's own documents in the task's format, rendered by its prompt."""

    def eval_tasks(self, metadata: dict[str, Any], include_path: Sequence[str], test: pd.DataFrame):
        """(lm-eval's task dict, its samples or None, {doc_id: (pool row, gold)}) that score `test`."""

    def lm_eval_args(self, split: SplitSettings) -> list[str]:
        """The lm_eval flags (--tasks and where to find it, which docs) that score a subsample's test."""


@dataclass(kw_only=True)
class SplitSettings(SampleSettings):
    """One split of one subsample of a task."""

    MINIMUM = {"subsample": 0}

    task: str = option(
        help="task slug (ag_news), task name (tapt_ag_news), a task YAML path, or any lm-eval "
        "multiple-choice or per-document generative task (arc_easy, gsm8k, or one in --include-path)"
    )
    split: Literal["train", "extra", "test"] = option("test", "which split of the subsample")
    subsample: int = option(0, "index of the seeded subsample")

    def docs(self) -> tuple[Spec, pd.DataFrame]:
        """The task's spec and the docs of this split."""
        spec = find_spec(self.task, self.include_path)
        return spec, spec.subsample_docs(self, self.subsample)[self.split]


def unlabeled(docs: pd.DataFrame) -> pd.DataFrame:
    """Documents without their gold answers, as every condition but the leak adapts on them: no `label`;
    a generative task's gold answer is its one choice, so there `answer` and `choices` go too."""
    gold = ["label", "answer", "choices"] if "answer" in docs else ["label"]
    return docs.drop(columns=[c for c in gold if c in docs])


def find_spec(task: str, include_path: Sequence[str] = ()) -> Spec:
    """A tapt_* task by slug, name or YAML path; else any lm-eval multiple-choice or generative task."""
    try:
        return load_spec(task, include_path)
    except UnknownTaskError as err:
        if task.endswith(".yaml"):
            raise
        spec = load_lm_eval_spec(task, include_path)
        if spec is None:
            raise TaskError(f"{err}; nor is it a task lm-eval knows (`lm_eval ls tasks`)") from None
        return spec


def draw_rows(spec: Spec, sample: SampleSettings, subsample: int) -> Subsample:
    """The pool rows of one subsample's splits (for an lm-eval task, train's rows are its training
    split's): a TaskError where the pool is too small for the design."""
    return spec.draw_rows(sample, subsample)


def subsample_docs(spec: Spec, sample: SampleSettings, subsample: int) -> dict[str, pd.DataFrame]:
    """train/extra/test docs: columns `text`, `label`, `row` (pool position), `prompt` (no answer),
    `choices` (what lm-eval scores after the prompt, each after the task's target delimiter)."""
    return spec.subsample_docs(sample, subsample)


def gold_continuations(spec: Spec, docs: pd.DataFrame) -> list[str]:
    """Each doc's gold choice after the task's delimiter: the continuation lm-eval scores for it."""
    return [spec.target_delimiter + c[int(y)] for c, y in zip(docs["choices"], docs["label"])]


def answered(spec: Spec, docs: pd.DataFrame, copies: int = 1) -> list[str]:
    """Each doc's prompt followed by its gold choice, exactly the continuation lm-eval scores for it
    (`copies` times: the planted leak's strength)."""
    return [p + a * copies for p, a in zip(docs["prompt"], gold_continuations(spec, docs))]
