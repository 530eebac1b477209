"""One contamination test scored two ways in one process: one sequence per forward pass (the
reference algorithm) and the batched scorer. Checks the log-probabilities agree to float tolerance
and the p-values match, then prints the speed ratio. The defaults keep the study's shape (2
examples per shard, 50 permutations: 500 examples in 256 shards) at a size this CPU runs in
minutes. Usage:
    python benchmarks/contamination_speed.py --data-dir ../shared/data [--n 32 --shards 16 --permutations 50]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from contamination.run import examples, load_model, result_of, shard_texts
from contamination.scorer import logprob_one, logprobs_batched
from harness.docs import subsample_docs
from harness.models import resolve
from harness.spec import load_spec


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pretrained", default="SmolLM2-135M-Instruct")
    p.add_argument("--task", default="ag_news")
    p.add_argument("--data-dir", default="../shared/data")
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--shards", type=int, default=16)
    p.add_argument("--permutations", type=int, default=50)
    p.add_argument("--context-len", type=int, default=1024)
    p.add_argument("--stride", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=16)
    a = p.parse_args()
    spec = load_spec(a.task)
    items = examples(spec, subsample_docs(spec, a.data_dir, n=a.n, m=len(spec.classes))["test"], "labeled")
    model, tok = load_model(resolve(a.pretrained), None)
    ids = tok(shard_texts(items, a.shards, a.permutations))["input_ids"]
    print(f"{a.task}: {a.n} examples, {a.shards} shards, {a.permutations} permutations -> {len(ids)} sequences "
          f"({len({tuple(s) for s in ids})} distinct), {sum(map(len, ids))} tokens")

    def timed(fn):
        start = time.perf_counter()
        out = fn()
        return np.array(out), time.perf_counter() - start

    ref, t_ref = timed(lambda: [logprob_one(model, s, a.context_len, a.stride) for s in ids])
    fast, t_fast = timed(lambda: logprobs_batched(model, ids, a.context_len, a.stride, a.batch_size))
    # batching alone, on distinct sequences only (what the batched scorer gains without de-duplication)
    distinct = list({tuple(s): None for s in ids})
    _, t_batch = timed(lambda: logprobs_batched(model, distinct, a.context_len, a.stride, a.batch_size))
    t_ref_distinct = t_ref * len(distinct) / len(ids)
    p_ref = result_of(list(ref), a.shards, a.permutations)["pval"]
    p_fast = result_of(list(fast), a.shards, a.permutations)["pval"]
    print(f"max |logprob difference| {np.abs(ref - fast).max():.2e} (relative {np.abs((ref - fast) / ref).max():.1e})")
    print(f"p-value: one-per-pass {p_ref:.6f}, batched {p_fast:.6f}")
    print(f"one sequence per pass: {t_ref:7.1f} s")
    print(f"batched scorer:        {t_fast:7.1f} s   speed-up {t_ref / t_fast:5.1f}x")
    print(f"  batching alone, on the distinct sequences: {t_batch:.1f} s vs an estimated "
          f"{t_ref_distinct:.1f} s one per pass (pro rata): {t_ref_distinct / t_batch:4.1f}x")


if __name__ == "__main__":
    main()
