"""Run the sharded exchangeability test on one subsample split of a task, for a model (+ adapter)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from contamination.exchangeability import split_shards, t_statistic
from contamination.logprobs import logprobs_batched
from harness.core.engine.models import ModelSettings, load_scoring_model
from harness.core.plumbing.errors import SettingsError
from harness.core.plumbing.sections import Sections
from harness.core.plumbing.settings import Settings, option
from harness.tasks import adapters
from harness.tasks.protocol import Spec, SplitSettings

SEPARATOR = "\n"  # between the examples of one concatenation


@dataclass(kw_only=True)
class ContaminationSettings(Settings):
    """How the test is run (the study: labeled format, 1024-token windows with stride 512)."""

    MINIMUM = {"shards": 2, "permutations": 1, "context_len": 2, "stride": 1, "batch_size": 1}

    shards: int = option(10, "number of contiguous shards (each gets one t-test difference)")
    permutations: int = option(25, "random orders scored per shard")
    format: Literal["labeled", "text-only"] = option(
        "labeled", "labeled: text-label pairs; text-only: the unlabeled prompts TAPT trains on"
    )
    context_len: int = option(1024, "tokens per scoring window")
    stride: int = option(512, "tokens between window starts")
    batch_size: int = option(16, "windows per forward pass")

    def check(self) -> None:
        super().check()
        if self.stride > self.context_len:
            problem = f"must be at most --context-len ({self.context_len}), got {self.stride}"
            raise SettingsError.of("stride", problem)


@dataclass(kw_only=True)
class ContaminationOptions(Settings):
    """Which adapter is tested, and where the result goes."""

    peft: str | None = option(None, "a PEFT adapter dir trained on --base")
    out: str | None = option(None, "write the result JSON here")


class ContaminationArgs(Sections):
    """One `tapt-bench contamination test`: a model (+ adapter) on one split of one subsample."""

    SECTIONS = {
        "sample": SplitSettings,
        "model": ModelSettings,
        "test": ContaminationSettings,
        "options": ContaminationOptions,
    }
    TITLES = {
        "sample": "the subsample split",
        "model": "the base model",
        "test": "the test",
        "options": "the adapter and the output",
    }

    def complete(self) -> None:
        self.sample.default_chat_model(self.model.base)  # as --chat-model's help says: default, the base


def examples(spec: Spec, docs, fmt: str) -> list[str]:
    """The split's examples in canonical order: text-label pairs, or the unlabeled prompts TAPT saw."""
    if fmt == "labeled":
        return [
            spec.labeled_text(t, c[int(y)]) for t, c, y in zip(docs["text"], docs["choices"], docs["label"])
        ]
    return list(docs["prompt"])


def shard_texts(items: list[str], shards: int, permutations: int, seed: int) -> list[str]:
    """Per shard, its canonical concatenation then `permutations` random orders (seeded)."""
    rng = np.random.default_rng(seed)
    texts = []
    for shard in split_shards(items, shards):
        orders = [np.arange(len(shard))] + [rng.permutation(len(shard)) for _ in range(permutations)]
        texts += [SEPARATOR.join(shard[i] for i in order) for order in orders]
    return texts


def result_of(scores: list[float], shards: int, permutations: int) -> dict[str, Any]:
    """The test's result from the log-probabilities of shard_texts' sequences, in that order."""
    per_shard = np.array(scores).reshape(shards, permutations + 1)
    t, pval = t_statistic(per_shard[:, 0], per_shard[:, 1:])
    return {
        "pval": pval,
        "t": t,
        "num_shards": shards,
        "permutations_per_shard": permutations,
        "canonical_logprobs": per_shard[:, 0].tolist(),
        "shuffled_logprobs": per_shard[:, 1:].tolist(),
    }


def score_texts(
    model,
    tokenizer,
    texts: list[str],
    shards: int,
    permutations: int,
    context_len: int,
    stride: int,
    batch_size: int,
) -> dict[str, Any]:
    ids = tokenizer(texts)["input_ids"]
    scores = logprobs_batched(model, ids, context_len, stride, batch_size, progress=True)
    return result_of(scores, shards, permutations)


def sharded_test(
    model,
    tokenizer,
    items: list[str],
    shards: int,
    permutations: int,
    context_len: int,
    stride: int,
    seed: int,
    batch_size: int,
) -> dict[str, Any]:
    """Score each shard's canonical concatenation and `permutations` random orders; t and p-value."""
    texts = shard_texts(items, shards, permutations, seed)
    return score_texts(model, tokenizer, texts, shards, permutations, context_len, stride, batch_size)


def run(args: ContaminationArgs) -> dict[str, Any]:
    """The full test for a task split, with its settings and wall time in the result."""
    spec, docs = args.sample.docs()
    test, peft = args.test, args.options.peft
    texts = shard_texts(examples(spec, docs, test.format), test.shards, test.permutations, args.sample.seed)
    model, tokenizer = load_scoring_model(args.model.base, peft)  # after the checks: loading is slow
    if peft:
        adapters.check_record(peft, model)  # a tapt.json copied from another adapter: other documents
    start = time.perf_counter()
    result = score_texts(
        model,
        tokenizer,
        texts,
        test.shards,
        test.permutations,
        test.context_len,
        test.stride,
        test.batch_size,
    )
    return {**result, "settings": args.keys(), "seconds": time.perf_counter() - start}
