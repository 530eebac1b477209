"""The unlabeled TAPT corpus of one subsample split: texts only, never labels or the train split."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness import prompts
from harness.docs import subsample_docs
from harness.spec import TaskError, TaskSpec, load_spec

TAPT_SPLITS = ("extra", "test")


@dataclass
class TaptInput:
    """Which unlabeled texts a TAPT run trains on, from which base, into which output."""

    task: str
    split: str
    base: str
    out: Path
    subsample: int = 0
    n: int = 100
    m: int = 100
    seed: int = 0
    data_dir: str | None = None
    overwrite: bool = False

    def docs(self) -> tuple[TaskSpec, pd.DataFrame]:
        """The task's spec and the docs of the chosen split (checked to be extra or test)."""
        check_split(self.split)
        spec = load_spec(self.task)
        return spec, subsample_docs(spec, self.data_dir, self.subsample, self.m, self.n, self.seed)[self.split]


def check_split(split: str) -> None:
    if split not in TAPT_SPLITS:
        raise TaskError(
            f"--split must be one of {TAPT_SPLITS} (TAPT never trains on the labeled train split), got {split!r}"
        )


def prompt_sequences(spec: TaskSpec, docs: pd.DataFrame, packing: bool) -> list[str]:
    """Padding: one zero-shot prompt (no answer) per sequence. Packing: the instruction once, then
    prompts.PACK_SIZE text blocks per sequence (the last may hold fewer)."""
    if not packing:
        return list(docs["prompt"])
    texts = list(docs["text"])
    size = prompts.PACK_SIZE
    return [prompts.packed(spec, texts[i : i + size]) for i in range(0, len(texts), size)]


def raw_texts(docs: pd.DataFrame) -> list[str]:
    """The raw texts for masked/causal-LM pretraining of a classifier's backbone."""
    return list(docs["text"])
