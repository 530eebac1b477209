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


def agreement(one: list[dict], two: list[dict]) -> dict:
    """Two runs' samples of the same docs, in doc order, compared: the largest |log-likelihood
    difference| over every (doc, choice), and the is_greedy flags, predictions and accs that agree.
    A response is [log-likelihood, is_greedy], as objects in memory or as strings in the JSON file."""
    resps = [[[(float(r[0][0]), str(r[0][1])) for r in s["resps"]] for s in run] for run in (one, two)]
    pairs = [(x, y) for d1, d2 in zip(*resps) for x, y in zip(d1, d2)]
    return {
        "docs": len(one),
        "pairs": len(pairs),
        "max_diff": max(abs(x[0] - y[0]) for x, y in pairs),
        "same_greedy": sum(x[1] == y[1] for x, y in pairs),
        "same_pred": sum(
            int(np.argmax([x[0] for x in d1]) == np.argmax([y[0] for y in d2])) for d1, d2 in zip(*resps)
        ),
        "same_acc": sum(s["acc"] == t["acc"] for s, t in zip(one, two)),
    }


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
    g = agreement(one, two)
    print(
        f"{a.task}: {g['docs']} docs, {g['pairs']} (doc, choice) pairs; "
        f"max |ll difference| {g['max_diff']:.2e}; "
        f"same is_greedy {g['same_greedy']}/{g['pairs']}, same prediction {g['same_pred']}/{g['docs']}, "
        f"same acc {g['same_acc']}/{g['docs']}; "
        f"acc {np.mean([s['acc'] for s in one]):.4f} vs {np.mean([s['acc'] for s in two]):.4f}"
    )


if __name__ == "__main__":
    main()
