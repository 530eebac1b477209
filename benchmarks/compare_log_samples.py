"""Two `lm_eval ... --log_samples --output_path DIR` runs of one task compared sample by sample: the
largest log-likelihood difference over every (doc, choice), and how many is_greedy flags, predictions
and accs agree. Usage (after running lm_eval with --model hf and with --model hf-prompt-once):
    python benchmarks/compare_log_samples.py runs/hf runs/once --task tapt_trec
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def samples(folder: str, task: str) -> list[dict]:
    found = sorted(Path(folder).rglob(f"samples_{task}_*.jsonl"))
    if not found:
        raise SystemExit(f"{folder}: no samples_{task}_*.jsonl under it; run lm_eval with --log_samples")
    lines = found[-1].read_text().splitlines()  # the newest run
    return sorted((json.loads(line) for line in lines), key=lambda s: s["doc_id"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--task", required=True)
    a = parser.parse_args()
    one, two = samples(a.first, a.task), samples(a.second, a.task)
    if [s["doc_id"] for s in one] != [s["doc_id"] for s in two]:
        raise SystemExit("the two runs scored different docs")
    # lm-eval writes each response as [log-likelihood, is_greedy], both as strings
    resps = [[[(float(r[0][0]), r[0][1]) for r in s["resps"]] for s in run] for run in (one, two)]
    diff = max(abs(x[0] - y[0]) for d1, d2 in zip(*resps) for x, y in zip(d1, d2))
    greedy = sum(x[1] == y[1] for d1, d2 in zip(*resps) for x, y in zip(d1, d2))
    pairs = sum(len(d) for d in resps[0])
    pred = sum(int(np.argmax([x[0] for x in d1]) == np.argmax([y[0] for y in d2])) for d1, d2 in zip(*resps))
    acc = sum(s["acc"] == t["acc"] for s, t in zip(one, two))
    print(
        f"{a.task}: {len(one)} docs, {pairs} (doc, choice) pairs; max |ll difference| {diff:.2e}; "
        f"same is_greedy {greedy}/{pairs}, same prediction {pred}/{len(one)}, same acc {acc}/{len(one)}; "
        f"acc {np.mean([s['acc'] for s in one]):.4f} vs {np.mean([s['acc'] for s in two]):.4f}"
    )


if __name__ == "__main__":
    main()
