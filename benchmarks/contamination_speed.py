"""One contamination test scored two ways in one process: one sequence per forward pass (the
reference algorithm) and the batched scorer. Checks the log-probabilities agree to float tolerance
and the p-values match, then prints the speed ratio. The defaults keep the study's shape (2
examples per shard, 50 permutations: 500 examples in 256 shards) at a size this CPU runs in
minutes. Usage:
    python benchmarks/contamination_speed.py --data-dir ../shared/data [--n 32 --shards 16 --permutations 50]
"""

from __future__ import annotations

import time

import numpy as np

from contamination.exchangeability_run import ContaminationArgs, examples, result_of, shard_texts
from contamination.logprobs import logprob_one, logprobs_batched
from harness.core.engine.models import load_scoring_model, resolve
from harness.core.plumbing.settings import parse_script


class SpeedArgs(ContaminationArgs):
    """The test's settings in the study's shard shape (2 examples per shard, 50 permutations): ag_news's
    test rows of a subsample with m 4 (which sets only which rows are test), 32 of them scored."""

    SMOKE = {"n": 8, "shards": 4, "permutations": 2}
    DEFAULTS = {"task": "ag_news", "m": 4, "n": 32, "shards": 16, "permutations": 50}


def main() -> None:
    a = parse_script(SpeedArgs, __doc__)
    spec, docs = a.sample.docs()
    sample, t = a.sample, a.test
    items = examples(spec, docs, "labeled")
    model, tok = load_scoring_model(resolve(a.model.base))
    ids = tok(shard_texts(items, t.shards, t.permutations, sample.seed))["input_ids"]
    print(
        f"{sample.task}: {sample.n} examples, {t.shards} shards, {t.permutations} permutations -> "
        f"{len(ids)} sequences "
        f"({len({tuple(s) for s in ids})} distinct), {sum(map(len, ids))} tokens"
    )

    def timed(fn):
        start = time.perf_counter()
        out = fn()
        return np.array(out), time.perf_counter() - start

    ref, t_ref = timed(lambda: [logprob_one(model, s, t.context_len, t.stride) for s in ids])
    fast, t_fast = timed(lambda: logprobs_batched(model, ids, t.context_len, t.stride, t.batch_size))
    # batching alone, on distinct sequences only (what the batched scorer gains without de-duplication)
    distinct = list({tuple(s): None for s in ids})
    _, t_batch = timed(lambda: logprobs_batched(model, distinct, t.context_len, t.stride, t.batch_size))
    t_ref_distinct = t_ref * len(distinct) / len(ids)
    p_ref = result_of(list(ref), t.shards, t.permutations)["pval"]
    p_fast = result_of(list(fast), t.shards, t.permutations)["pval"]
    print(
        f"max |logprob difference| {np.abs(ref - fast).max():.2e} (relative "
        f"{np.abs((ref - fast) / ref).max():.1e})"
    )
    print(f"p-value: one-per-pass {p_ref:.6f}, batched {p_fast:.6f}")
    print(f"one sequence per pass: {t_ref:7.1f} s")
    print(f"batched scorer:        {t_fast:7.1f} s   speed-up {t_ref / t_fast:5.1f}x")
    print(
        f"  batching alone, on the distinct sequences: {t_batch:.1f} s vs an estimated "
        f"{t_ref_distinct:.1f} s one per pass (pro rata): {t_ref_distinct / t_batch:4.1f}x"
    )


if __name__ == "__main__":
    main()
