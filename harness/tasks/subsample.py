"""Seeded, stratified, disjoint subsamples: the unit of replication of the experiment."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from harness.core.design import seeds
from harness.core.design.conditions import NULL
from harness.core.plumbing.errors import TaskError
from harness.core.plumbing.settings import NEVER, WHEN_SET, Settings, option, since
from harness.results.units import FIRST_TRAIN_DRAW

SPLITS = ("train", "extra", "test")
DRAWS = (*SPLITS, NULL)  # and a third draw beside extra and test (calibrate's null model): up to n rows


@dataclass(kw_only=True)
class DataSettings(Settings):
    """Where the task YAMLs and their data come from."""

    PATHS = ("data_dir", "include_path")
    RECORD = {"data_dir": NEVER, "include_path": NEVER}  # where data is read from changes no number

    data_dir: str | None = option(
        None,
        "folder of <slug>/data.parquet|csv|jsonl (default: $TAPT_BENCH_DATA_DIR, else the Hugging Face hub)",
    )
    include_path: list[str] = option(
        [],
        "extra folders of task YAMLs, searched after the shipped tasks (as lm_eval's --include_path)",
    )


@dataclass(kw_only=True)
class SampleSettings(DataSettings):
    """The design of a cell: sizes and seed (the study's default cell: m = n = 100)."""

    MINIMUM = {"m": 1, "n": 1, "seed": 0}
    BELOW = {"seed": 2**31}  # the classifier stream, seed plus the unit's index (core.seeds): 32 bits
    # prompt_format: added after the first results; chat_model: the run's base, recorded as such;
    # train_draw: every result before it drew proportionally, so those keep their hash (since)
    RECORD = {"prompt_format": WHEN_SET, "chat_model": NEVER, "train_draw": since(FIRST_TRAIN_DRAW)}

    m: int = option(100, "labeled train size (stratified by class)")
    n: int = option(100, "size of the unlabeled extra set and of the labeled test set")
    seed: int = option(0, "seed of the subsample draw and of training")
    train_draw: Literal["balanced", "proportional"] = option(
        "balanced",
        "how train's m rows are drawn: balanced, int(m / K) rows of each of the K classes (the study's "
        "draw, so train may hold fewer than m); proportional: m rows in the pool's class proportions, "
        "at least 1 a class",
    )
    prompt_format: Literal["plain", "chat"] = option(
        "plain",
        "chat: a tapt_* prompt through the base's chat template where it has one, as the study did (system: "
        "the instruction, user: the text, assistant: ' ### Answer:' left open); plain: the text alone",
    )
    chat_model: str | None = option(
        None, "with prompt_format chat: the model whose chat template renders the prompts (default: the base)"
    )

    def default_chat_model(self, base: str) -> None:
        """With prompt_format chat and no chat_model, the base's own template renders the prompts."""
        if self.prompt_format == "chat" and self.chat_model is None:
            self.chat_model = base


@dataclass(frozen=True)
class Subsample:
    """Pool row positions of the three disjoint sets of one subsample, and of a third draw beside extra
    and test (`null`: up to n rows, from the same shuffle after them; extra and test do not depend on it)."""

    train: np.ndarray
    extra: np.ndarray
    test: np.ndarray
    null: np.ndarray = field(default_factory=lambda: np.array([], dtype=int))

    def rows(self, split: str) -> np.ndarray:
        return getattr(self, split)


def majority_share(gold) -> float:
    """The share of the most frequent of a sequence of gold answers (the study's `majority`: of a test
    subsample; `majority_all`: of the pool)."""
    _, counts = np.unique(np.asarray(gold).astype(str), return_counts=True)
    return float(counts.max() / counts.sum())


def train_counts(class_counts: np.ndarray, m: int, how: str) -> np.ndarray:
    """Per-class train sizes by the draw `how` names: balanced, int(m / K) of every class as the study's
    code draws them (kddubey/pretrain-on-test, experiment.py `_stratified_sample`); proportional
    (stratified_counts). A TaskError where a class has too few rows."""
    if how == "proportional":
        return stratified_counts(class_counts, m)
    each = m // len(class_counts)
    short = np.flatnonzero(class_counts < each)
    if len(short):
        c = int(short[0])
        raise TaskError(
            f"train_draw balanced takes int(m / K) = int({m} / {len(class_counts)}) = {each} rows of every "
            f"class, and class {c} has {int(class_counts[c])} in the pool; lower m, or set train_draw: "
            "proportional"
        )
    return np.full(len(class_counts), each)


def stratified_counts(class_counts: np.ndarray, m: int) -> np.ndarray:
    """Per-class train sizes: proportional to the pool (largest remainder), at least 1 each."""
    quota = m * class_counts / class_counts.sum()
    counts = np.maximum(1, np.floor(quota)).astype(int)
    while counts.sum() > m:  # the minimum of 1 overshot: take from the most over-quota class
        over = np.where(counts > 1, counts - quota, -np.inf)
        counts[np.argmax(over)] -= 1
    while counts.sum() < m:  # hand out the remainder to the classes furthest below quota
        under = np.where(counts < class_counts, quota - counts, -np.inf)
        counts[np.argmax(under)] += 1
    return counts


def draw(
    labels: np.ndarray, subsample: int, m: int, n: int, seed: int, train_draw: str = "balanced"
) -> Subsample:
    """Draw subsample `subsample` of a pool with these labels (0..K-1, in pool order).

    train: rows of every class, int(m / K) each (balanced, the study's) or m in the pool's proportions
    (train_counts); extra and test: n rows each drawn uniformly from the rest. A pure function of its
    arguments: numpy's PCG64 seeded with (seed, subsample) gives the same rows on every machine and
    process (harness.core.design.seeds, stream `draw`).
    """
    labels = np.asarray(labels)
    k = int(labels.max()) + 1
    if m < k:
        raise TaskError(f"m={m} is smaller than the number of classes ({k}); every class needs a train row")
    if m + 2 * n > len(labels):
        raise TaskError(
            f"m + 2n = {m} + 2*{n} = {m + 2 * n} exceeds the pool of {len(labels)} rows; lower n or m"
        )
    rng = seeds.rng(seed, subsample, "draw")
    counts = train_counts(np.bincount(labels, minlength=k), m, train_draw)
    train = np.concatenate(
        [rng.choice(np.flatnonzero(labels == c), size=counts[c], replace=False) for c in range(k)]
    )
    rest = np.setdiff1d(np.arange(len(labels)), train)
    rest = rng.permutation(rest)
    return Subsample(train=np.sort(train), extra=rest[:n], test=rest[n : 2 * n], null=rest[2 * n : 3 * n])


def draw_eval(labels: np.ndarray | None, subsample: int, n: int, seed: int, size: int) -> Subsample:
    """extra and test of an lm-eval task's evaluation pool of `size` docs: two disjoint draws of n docs,
    stratified by gold index where `labels` are given (the choices are the same for every doc), else
    uniform. Its own stream of the seed (`eval_draw`, harness.core.design.seeds); `train` is drawn from the
    training split apart."""
    if 2 * n > size:
        raise TaskError(f"2n = {2 * n} exceeds the {size} evaluation docs of the task; lower n")
    rng = seeds.rng(seed, subsample, "eval_draw")
    no_train = np.array([], dtype=int)
    if labels is None or len(np.unique(labels)) < 2:
        order = rng.permutation(size)
        return Subsample(train=no_train, extra=order[:n], test=order[n : 2 * n], null=order[2 * n : 3 * n])
    labels = np.asarray(labels)
    class_counts = np.bincount(labels)
    counts = stratified_counts(class_counts, n)
    short = [c for c in range(len(counts)) if 2 * counts[c] > class_counts[c]]
    if short:
        raise TaskError(
            f"n = {n}: gold index {short[0]} has {class_counts[short[0]]} docs, too few for "
            f"{counts[short[0]]} in both extra and test; lower n"
        )
    shuffled = [rng.permutation(np.flatnonzero(labels == c)) for c in range(len(counts))]
    extra = np.concatenate([s[: counts[c]] for c, s in enumerate(shuffled)])
    test = np.concatenate([s[counts[c] : 2 * counts[c]] for c, s in enumerate(shuffled)])
    extra, test = rng.permutation(extra), rng.permutation(test)
    null = np.concatenate([s[2 * counts[c] : 3 * counts[c]] for c, s in enumerate(shuffled)])
    return Subsample(train=no_train, extra=extra, test=test, null=rng.permutation(null))
