"""The score-first stream: test cut into chunks, each chunk scored by the method adapted on the chunks
before it and never on itself (the rule for legitimate test-time training: adapt only on inputs already
scored). The first chunk is scored by the base. Two modes:
- carry (TLM's online setting as its authors run it): one adapter carried on, chunk to chunk; chunk i is
  scored by the model after it trained on chunk i-1, each chunk once, a fresh optimiser each time;
- restart: chunk i scored by the method run from the base on chunks 0..i-1 together.
Its accuracy minus extra's is what online adaptation gains without reading the documents it is scored
on."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.core.plumbing.errors import UserError
from tapt import methods

DROPPED = ("rows", methods.VOTES)  # per-document keys of a chunk's record: the unit keeps the counts


def chunks(test: pd.DataFrame, k: int) -> list[pd.DataFrame]:
    """Test's documents in their subsample order, cut into k contiguous chunks of near-equal size."""
    return [test.iloc[idx] for idx in np.array_split(np.arange(len(test)), k)]


def sized(test: pd.DataFrame, size: int) -> list[pd.DataFrame]:
    """Test's documents in their subsample order, in chunks of `size` (the last may be smaller), as TLM's
    authors cut their stream (workflow.py:202-215)."""
    return [test.iloc[i : i + size] for i in range(0, len(test), size)]


def run(
    method: methods.Method,
    x: methods.Inputs,
    parts: list[pd.DataFrame],
    carry: bool,
    base_scored: pd.DataFrame,
    score: Callable[[Any], pd.DataFrame],
    restored: Callable[[str, Any], None],
    base_print: dict | None = None,
) -> tuple[pd.DataFrame, dict, Any]:
    """(per-document scores in base_scored's order, the record, the base given back). `x` holds the
    base and test's documents without labels, `parts` them in chunks; `carry` the mode (above); `score`
    scores a model on the whole split; `restored` checks the base a method gave back; `base_print` is
    the base's fingerprint, if known."""
    k = len(parts)
    kept = [base_scored[base_scored["row"].isin(parts[0]["row"])]]
    records, learned, model, adapted = [], 0, x.model, None
    for i in range(1, k):
        seen = parts[i - 1] if carry else pd.concat(parts[:i], ignore_index=True)
        where = f"stream (chunk {i} of {k})"
        with tempfile.TemporaryDirectory() as work:
            inputs = methods.Inputs(model, x.tokenizer, x.spec, seen, x.settings, x.seed, Path(work), carry)
            if carry and adapted is not None:
                use_cache = adapted.use_cache  # the base's, read before the first chunk's training
            adapted = method.run(inputs, base_print, where)
        if carry and i > 1:
            adapted.use_cache = use_cache
            carried_on(method, model, adapted.model, where)
        frame = score(adapted.model)
        kept.append(frame[frame["row"].isin(parts[i]["row"])])
        records.append({key: v for key, v in adapted.record.items() if key not in DROPPED})
        learned += int(adapted.record.get(methods.LEARNED_FROM, len(seen)))
        model = adapted.model
        if not carry or i == k - 1:
            model = adapted.base()
            restored(where, model)
    base = model
    order = {r: j for j, r in enumerate(base_scored["row"])}
    scored = pd.concat(kept, ignore_index=True).sort_values("row", key=lambda s: s.map(order))
    record = {"chunks": [len(p) for p in parts], methods.LEARNED_FROM: learned, "per_chunk": records}
    if carry:
        record["carried"] = True
    if any("steps" in r for r in records):
        record["steps"] = sum(int(r.get("steps", 0)) for r in records)
    return scored.reset_index(drop=True), record, base


def carried_on(method: methods.Method, given: Any, returned: Any, where: str) -> None:
    """A method in the carry mode trains the adapter it was given on: it must return that model, not a
    new adapter over it (which would stack a second one and restart from the first's end)."""
    if returned is not given:
        raise UserError(
            f"method {method.name} ({method.source}) returned a new model in the {where} of the stream's "
            "carry mode; given Inputs.online and a model with its adapter (Inputs.carried()), adapt must "
            "train that adapter on and return the same model (Inputs.lora does), or set stream_mode: restart"
        )
