"""Zero-shot scoring through lm-eval: accuracy and per-example class probabilities on one split."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from harness.tasks.spec import TaskSpec, lm_eval_tasks


def lm_eval_task(spec: TaskSpec, metadata: dict[str, Any], include_path: list[str]) -> dict:
    """The task as lm-eval's TaskManager loads it, its docs the subsample split that `metadata` names:
    loaded once, then scored under each model."""
    return lm_eval_tasks(include_path, metadata).load(spec.task_name)


def scorer(model, tokenizer, batch_size: int):
    """lm-eval's HF model around an already loaded model (a PEFT-wrapped one included)."""
    from lm_eval.models.huggingface import HFLM

    logging.getLogger("lm_eval.models.huggingface").setLevel(logging.ERROR)  # the model-object warning
    return HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size)


def score(lm, task: dict) -> pd.DataFrame:
    """One row per eval doc: `row` (pool position), `label`, `probs` (softmax over the class
    log-likelihoods lm-eval computed) and `correct` (lm-eval's acc for that doc).

    lm-eval's `evaluate`, not `simple_evaluate`: the same requests and metrics without the run
    provenance simple_evaluate adds (a torch environment report that starts subprocesses), which the
    grid records once per run in its manifest instead."""
    from lm_eval.evaluator import evaluate

    out = evaluate(lm, task, log_samples=True, bootstrap_iters=0, verbosity="ERROR")
    (samples,) = out["samples"].values()
    rows = []
    for s in sorted(samples, key=lambda s: s["doc_id"]):
        ll = np.array([float(r[0]) for r in s["filtered_resps"]])
        p = np.exp(ll - ll.max())
        rows.append(
            {
                "row": int(s["doc"]["row"]),
                "label": int(s["doc"]["label"]),
                "probs": (p / p.sum()).tolist(),
                "correct": bool(s["acc"]),
            }
        )
    return pd.DataFrame(rows)
