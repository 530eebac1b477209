"""The documents of one subsample's splits, with the zero-shot prompt every stage reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pandas as pd

from harness.core.settings import option
from harness.tasks import prompts
from harness.tasks.data import load_pool
from harness.tasks.spec import TaskSpec, load_spec
from harness.tasks.subsample import SPLITS, SampleSettings, draw


@dataclass(kw_only=True)
class SplitSettings(SampleSettings):
    """One split of one subsample of a task."""

    MINIMUM = {"subsample": 0}

    task: str = option(help="task slug (ag_news), task name (tapt_ag_news) or a task YAML path")
    split: Literal["train", "extra", "test"] = option("test", "which split of the subsample")
    subsample: int = option(0, "index of the seeded subsample")

    def docs(self) -> tuple[TaskSpec, pd.DataFrame]:
        """The task's spec and the docs of this split."""
        spec = load_spec(self.task, self.include_path)
        return spec, subsample_docs(spec, self, self.subsample)[self.split]


def subsample_docs(spec: TaskSpec, sample: SampleSettings, subsample: int) -> dict[str, pd.DataFrame]:
    """train/extra/test docs: columns `text`, `label`, `row` (pool position), `prompt` (no answer)."""
    pool = load_pool(spec, sample.data_dir)
    sub = draw(pool["label"].to_numpy(), subsample, sample.m, sample.n, sample.seed)
    out = {}
    for split in SPLITS:
        rows = sub.rows(split)
        docs = pool.iloc[rows].assign(row=rows).reset_index(drop=True)
        out[split] = docs.assign(prompt=[prompts.zero_shot(spec, t) for t in docs["text"]])
    return out
