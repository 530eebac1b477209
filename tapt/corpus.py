"""The unlabeled TAPT corpus of one subsample split: texts only, never labels or the train split."""

from __future__ import annotations

import pandas as pd

from harness import prompts
from harness.spec import TaskError, TaskSpec

TAPT_SPLITS = ("extra", "test")


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
