"""The unlabeled TAPT corpus of one subsample split: texts only, never labels or the train split."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.core.design.conditions import TAPT_SPLITS
from harness.core.engine.models import ModelSettings
from harness.core.plumbing.errors import SettingsError
from harness.core.plumbing.sections import Sections
from harness.core.plumbing.settings import Settings, option
from harness.tasks import prompts
from harness.tasks.protocol import Spec, SplitSettings, answered


@dataclass(kw_only=True)
class TaptOptions(Settings):
    """Where one TAPT run outside the grid writes, and whether it trains on the answers too."""

    HOME = ("out",)
    out: str = option(help="output dir (written atomically: staged, then moved into place)")
    overwrite: bool = option(False, "replace an existing output dir")
    leak: bool = option(
        False,
        "train on the texts followed by their true answers (labeled contamination: the "
        "grid's planted-leak condition); default: unlabeled texts only",
    )


class TaptArgs(Sections):
    """One TAPT run outside the grid: which split (`sample`), from which base (`model`), into which
    output (`options`). Each command adds how it trains as one more section."""

    SECTIONS = {"sample": SplitSettings, "model": ModelSettings, "options": TaptOptions}
    TITLES = {"sample": "the subsample split", "model": "the base model", "options": "the output"}

    def complete(self) -> None:
        self.sample.default_chat_model(self.model.base)

    def recorded(self) -> dict:
        """The keys its output's tapt.json records: every one but where it writes."""
        return {k: v for k, v in self.keys().items() if k not in ("out", "overwrite")}

    def check(self) -> None:
        if self.sample.split not in TAPT_SPLITS:
            why = "TAPT never trains on the labeled train split"
            problem = f"must be one of {TAPT_SPLITS} ({why}), got {self.sample.split!r}"
            raise SettingsError.of("split", problem)


def prompt_sequences(spec: Spec, docs: pd.DataFrame, packing: bool, answers: bool = False) -> list[str]:
    """Padding: one zero-shot prompt per sequence. Packing: the task's preamble once, then
    prompts.PACK_SIZE texts per sequence (the last may hold fewer). Without `answers` no label is in
    them; with it, each prompt or text is followed by its gold choice as lm-eval scores it."""
    if not packing:
        return answered(spec, docs) if answers else list(docs["prompt"])
    size = prompts.PACK_SIZE
    return [spec.packed(docs.iloc[i : i + size], answers) for i in range(0, len(docs), size)]


def raw_texts(docs: pd.DataFrame, answers: bool = False, copies: int = 1) -> list[tuple[str, str]]:
    """The raw texts for masked/causal-LM pretraining of a classifier's backbone, each as (text, what
    follows it): nothing, or with `answers` a new line and its gold choice, `copies` times (the leak's
    strength: more of the label in the same document, never more documents)."""
    if not answers:
        return [(t, "") for t in docs["text"]]
    return [(t, f"\n{c[int(y)]}" * copies) for t, c, y in zip(docs["text"], docs["choices"], docs["label"])]


def answer_masks(tokenizer, ids: list[list[int]], pairs: list[tuple[str, str]]) -> list[list[int]]:
    """Per sequence of `keeping_answers`, 1 at the tokens of its answer (what follows the text), 0
    elsewhere: the answer's own tokens, found at the sequence's end before its closing special tokens.
    A sequence whose end does not spell its answer (a tokenizer that merges across the new line) gets
    none marked; the caller counts them."""
    special = set(tokenizer.all_special_ids)
    out = []
    for seq, (_, answer) in zip(ids, pairs):
        mask = [0] * len(seq)
        want = tokenizer(answer, add_special_tokens=False)["input_ids"] if answer else []
        end = len(seq)
        while end and seq[end - 1] in special:
            end -= 1
        if want and end >= len(want) and seq[end - len(want) : end] == want:
            mask[end - len(want) : end] = [1] * len(want)
        out.append(mask)
    return out


def keeping_answers(tokenizer, pairs: list[tuple[str, str]], max_length: int, special: bool = True) -> list:
    """Token ids of each text followed by its answer, at most `max_length` tokens: where the two do not
    fit, the text is cut (at a token's end, by the tokenizer's offsets), never the answer (a leak whose
    label is cut off teaches no label). A pair that fits is tokenized whole, exactly as before this rule;
    a cut one is tokenized whole too, from the cut text."""

    def encode(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=special)["input_ids"]

    out = []
    for text, answer in pairs:
        ids = encode(text + answer)
        if len(ids) > max_length:
            ends = [
                end
                for _, end in tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)[
                    "offset_mapping"
                ]
            ]
            keep = len(ends) - (len(ids) - max_length)  # the text's tokens to keep, by a first count
            while keep > 0 and len(ids) > max_length:
                ids, keep = encode(text[: ends[keep - 1]] + answer), keep - 1
            if len(ids) > max_length:  # the answer alone is longer than a sequence: nothing to keep it in
                ids = tokenizer(answer, truncation=True, max_length=max_length, add_special_tokens=special)[
                    "input_ids"
                ]
        out.append(ids)
    return out
