"""The score-first stream: test cut into chunks, each chunk scored by the method adapted on the chunks
before it and never on itself (the rule for legitimate test-time training: adapt only on inputs already
scored). The first chunk is scored by the base; chunk i by the method run, from the base, on chunks
0..i-1 together. Its accuracy minus extra's is what online adaptation gains without reading the
documents it is scored on."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tapt import methods

DROPPED = ("rows", methods.VOTES)  # per-document keys of a chunk's record: the unit keeps the counts


def chunks(test: pd.DataFrame, k: int) -> list[pd.DataFrame]:
    """Test's documents in their subsample order, cut into k contiguous chunks of near-equal size."""
    return [test.iloc[idx] for idx in np.array_split(np.arange(len(test)), k)]


def run(
    method: methods.Method,
    x: methods.Inputs,
    k: int,
    base_scored: pd.DataFrame,
    score: Callable[[Any], pd.DataFrame],
    restored: Callable[[str, Any], None],
    base_print: dict | None = None,
) -> tuple[pd.DataFrame, dict, Any]:
    """(per-document scores in base_scored's order, the record, the base given back). `x` holds the
    base and test's documents without labels; `score` scores a model on the whole split; `restored`
    checks the base a method gave back; `base_print` is the base's fingerprint, if known."""
    parts = chunks(x.docs, k)
    kept = [base_scored[base_scored["row"].isin(parts[0]["row"])]]
    records, learned, base = [], 0, x.model
    for i in range(1, k):
        seen = pd.concat(parts[:i], ignore_index=True)
        with tempfile.TemporaryDirectory() as work:
            inputs = methods.Inputs(base, x.tokenizer, x.spec, seen, x.settings, x.seed, Path(work))
            adapted = method.run(inputs, base_print, f"stream (chunk {i} of {k})")
        frame = score(adapted.model)
        kept.append(frame[frame["row"].isin(parts[i]["row"])])
        records.append({key: v for key, v in adapted.record.items() if key not in DROPPED})
        learned += int(adapted.record.get(methods.LEARNED_FROM, len(seen)))
        base = adapted.base()
        restored(f"stream (chunk {i} of {k})", base)
    order = {r: j for j, r in enumerate(base_scored["row"])}
    scored = pd.concat(kept, ignore_index=True).sort_values("row", key=lambda s: s.map(order))
    record = {"chunks": [len(p) for p in parts], methods.LEARNED_FROM: learned, "per_chunk": records}
    if any("steps" in r for r in records):
        record["steps"] = sum(int(r.get("steps", 0)) for r in records)
    return scored.reset_index(drop=True), record, base
