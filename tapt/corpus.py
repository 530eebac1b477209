"""The unlabeled TAPT corpus of one subsample split: texts only, never labels or the train split."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.core.conditions import TAPT_SPLITS
from harness.core.errors import SettingsError
from harness.core.models import ModelSettings
from harness.core.settings import option
from harness.tasks import prompts
from harness.tasks.protocol import Spec, SplitSettings, answered


@dataclass(kw_only=True)
class TaptInput(SplitSettings, ModelSettings):
    """Which unlabeled texts a TAPT run trains on, from which base, into which output."""

    HOME = ("out",)
    out: str = option(help="output dir (written atomically: staged, then moved into place)")
    overwrite: bool = option(False, "replace an existing output dir")
    leak: bool = option(
        False,
        "train on the texts followed by their true answers (labeled contamination: the "
        "grid's planted-leak condition); default: unlabeled texts only",
    )

    def check(self) -> None:
        super().check()
        self.default_chat_model(self.base)
        if self.split not in TAPT_SPLITS:
            why = "TAPT never trains on the labeled train split"
            problem = f"must be one of {TAPT_SPLITS} ({why}), got {self.split!r}"
            raise SettingsError.of("split", problem)


def prompt_sequences(spec: Spec, docs: pd.DataFrame, packing: bool, answers: bool = False) -> list[str]:
    """Padding: one zero-shot prompt per sequence. Packing: the task's preamble once, then
    prompts.PACK_SIZE texts per sequence (the last may hold fewer). Without `answers` no label is in
    them; with it, each prompt or text is followed by its gold choice as lm-eval scores it."""
    if not packing:
        return answered(spec, docs) if answers else list(docs["prompt"])
    size = prompts.PACK_SIZE
    return [spec.packed(docs.iloc[i : i + size], answers) for i in range(0, len(docs), size)]


def raw_texts(docs: pd.DataFrame, answers: bool = False) -> list[str]:
    """The raw texts for masked/causal-LM pretraining of a classifier's backbone; with `answers`,
    each followed by a new line and its gold choice."""
    if not answers:
        return list(docs["text"])
    return [f"{t}\n{c[int(y)]}" for t, c, y in zip(docs["text"], docs["choices"], docs["label"])]
