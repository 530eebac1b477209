"""The sharded exchangeability test of Oren et al. (2024): shards and the statistic.

A model that saw a dataset in its released (canonical) order assigns that order a higher
log-probability than random orders of the same examples. Per shard s, d_s = canonical_s minus the
mean over shuffled orders; t = mean(d) / std(d) * sqrt(S) (std with ddof 0); the p-value is
the upper tail of Student's t with S - 1 degrees of freedom (its survival function, which stays
accurate where 1 - CDF would round to 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.core.plumbing.errors import UserError

LOG_KEYS = ("canonical_logprobs", "shuffled_logprobs")


def shard_sizes(count: int, shards: int) -> list[int]:
    """Near-equal contiguous shard sizes; the first count % shards shards get one extra example."""
    if count < shards:
        raise UserError(f"{count} examples cannot fill {shards} shards; lower --shards or raise --n")
    base, extra = divmod(count, shards)
    return [base + 1 if i < extra else base for i in range(shards)]


def split_shards(examples: Sequence[str], shards: int) -> list[list[str]]:
    out, start = [], 0
    for size in shard_sizes(len(examples), shards):
        out.append(list(examples[start : start + size]))
        start += size
    return out


def t_statistic(canonical: Sequence[float], shuffled: Sequence[Sequence[float]]) -> tuple[float, float]:
    """(t, p-value) from per-shard canonical log-probabilities and lists of shuffled ones."""
    from scipy import stats

    canonical = np.asarray(canonical, dtype=float)
    if len(canonical) != len(shuffled) or len(canonical) < 2:
        raise UserError(
            f"need one shuffled list per shard and at least 2 shards; got {len(canonical)} "
            f"canonical and {len(shuffled)} shuffled"
        )
    diffs = canonical - np.array([np.mean(s) for s in shuffled])
    if np.std(diffs) == 0:
        raise UserError(
            f"every shard's canonical - shuffled difference is {diffs[0]:+.6g}: with no spread the t-test is "
            "undefined (no p-value); a model that scores every order alike, or a log written by hand"
        )
    t = float(np.mean(diffs) / np.std(diffs) * np.sqrt(len(diffs)))
    return t, float(stats.t.sf(t, df=len(diffs) - 1))


def pvalue_from_log(log: dict[str, Any], source: str = "log") -> float:
    """The p-value of a result/log JSON holding canonical_logprobs and shuffled_logprobs."""
    missing = [k for k in LOG_KEYS if k not in log]
    if missing:
        raise UserError(f"{source}: missing key(s) {missing}; a test log holds {list(LOG_KEYS)}")
    canonical, shuffled = log["canonical_logprobs"], log["shuffled_logprobs"]
    for key, values in (("canonical_logprobs", [canonical]), ("shuffled_logprobs", shuffled)):
        flat = [x for row in values if isinstance(row, list) for x in row] if isinstance(values, list) else []
        rows_ok = isinstance(values, list) and all(isinstance(row, list) and row for row in values)
        numbers = rows_ok and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in flat)
        if not numbers or not all(math.isfinite(x) for x in flat):
            held = "NaN or an infinity"
            if not rows_ok:
                held = (
                    "an empty list, or an entry that is not a list"
                    if key == "shuffled_logprobs"
                    else "no numbers"
                )
            elif not numbers:
                held = "a non-number"
            shape = "a list of numbers, one a shard" if key == "canonical_logprobs" else "a list a shard"
            raise UserError(
                f"{source}: {key} must hold finite numbers (log-probabilities: {shape}); it holds {held}: "
                "the log is damaged, write it again with `contamination exchangeability --out`"
            )
    lengths = sorted({len(row) for row in shuffled})
    if len(shuffled) != len(canonical) or len(lengths) > 1:
        held = (
            f"{len(shuffled)} lists for {len(canonical)} shards"
            if len(shuffled) != len(canonical)
            else f"lists of {' and '.join(map(str, lengths))} numbers"
        )
        raise UserError(
            f"{source}: shuffled_logprobs holds {held}: a test's log holds one list a shard, each of one "
            "log p a permutation, as many for every shard; the log is damaged, write it again with "
            "`contamination exchangeability --out`"
        )
    return t_statistic(canonical, shuffled)[1]
