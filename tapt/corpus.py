"""The unlabeled TAPT corpus of one subsample split: texts only, never labels or the train split."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness import prompts
from harness.splits import SplitSettings
from harness.errors import SettingsError
from harness.models import ModelSettings
from harness.settings import option
from harness.spec import TaskSpec

TAPT_SPLITS = ("extra", "test")


@dataclass(kw_only=True)
class TaptInput(SplitSettings, ModelSettings):
    """Which unlabeled texts a TAPT run trains on, from which base, into which output."""

    out: str = option(help="output dir (written atomically: staged, then moved into place)")
    overwrite: bool = option(False, "replace an existing output dir")

    def check(self) -> None:
        super().check()
        if self.split not in TAPT_SPLITS:
            problem = f"must be one of {TAPT_SPLITS} (TAPT never trains on the labeled train split), got {self.split!r}"
            raise SettingsError(f"split {problem}", "split", problem)


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
