"""The documents of one subsample's splits, with the zero-shot prompt every stage reads."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness import prompts
from harness.data import load_pool
from harness.spec import TaskSpec
from harness.subsample import SPLITS, draw

DEFAULTS = {"subsample": 0, "m": 100, "n": 100, "seed": 0}


def subsample_docs(
    spec: TaskSpec,
    data_dir: str | Path | None = None,
    subsample: int = 0,
    m: int = 100,
    n: int = 100,
    seed: int = 0,
) -> dict[str, pd.DataFrame]:
    """train/extra/test docs: columns `text`, `label`, `row` (pool position), `prompt` (no answer)."""
    pool = load_pool(spec, data_dir)
    sub = draw(pool["label"].to_numpy(), subsample, m, n, seed)
    out = {}
    for split in SPLITS:
        rows = sub.rows(split)
        docs = pool.iloc[rows].assign(row=rows).reset_index(drop=True)
        out[split] = docs.assign(prompt=[prompts.zero_shot(spec, t) for t in docs["text"]])
    return out
