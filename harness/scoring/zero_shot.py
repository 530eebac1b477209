"""Zero-shot scoring through lm-eval: accuracy and per-example class probabilities on one split."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness.tasks.protocol import Spec


@dataclass
class EvalTask:
    """A task loaded once, then scored under each model: lm-eval's task dict, the eval-doc indices to
    score (None: all its docs), and each scored doc's pool row and gold index by lm-eval's doc_id."""

    tasks: dict
    samples: dict[str, list[int]] | None
    docs: dict[int, tuple[int, int]]


def lm_eval_task(
    spec: Spec, metadata: dict[str, Any], include_path: list[str], test: pd.DataFrame
) -> EvalTask:
    """A tapt_* task's docs are the subsample split `metadata` names (its data hook draws them); an lm-eval
    task's are its own evaluation docs, of which lm-eval scores exactly the `test` rows (`samples`)."""
    return EvalTask(*spec.eval_tasks(metadata, include_path, test))


def scorer(model, tokenizer, batch_size: int, keep_stats: bool = False):
    """lm-eval's HF model around an already loaded model (a PEFT-wrapped one included), as `hf-prompt-once`:
    each test prompt read once, every class scored from its cache. With `keep_stats` it also keeps each
    prompt's token log-probs (its `stats`), so that the exposure test needs no second pass over them."""
    from harness.scoring.prompt_once import PromptOnceLM

    logging.getLogger("lm_eval.models.huggingface").setLevel(logging.ERROR)  # the model-object warning
    lm = PromptOnceLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size)
    lm.stats = {} if keep_stats else None
    return lm


def score(lm, task: EvalTask) -> pd.DataFrame:
    """One row per scored doc: `row` (pool position), `label`, `probs` (softmax over the choices'
    log-likelihoods lm-eval computed), `correct` (lm-eval's acc for that doc) and, where the task
    defines it, `correct_norm` (its acc_norm).

    lm-eval's `evaluate`, not `simple_evaluate`: the same requests and metrics without the run
    provenance simple_evaluate adds (a torch environment report that starts subprocesses), which the
    grid records once per run in its manifest instead."""
    from lm_eval.evaluator import evaluate

    out = evaluate(
        lm, task.tasks, samples=task.samples, log_samples=True, bootstrap_iters=0, verbosity="ERROR"
    )
    (samples,) = out["samples"].values()
    rows = []
    for s in sorted(samples, key=lambda s: s["doc_id"]):
        ll = np.array([float(r[0]) for r in s["filtered_resps"]])
        p = np.exp(ll - ll.max())
        row, label = task.docs[int(s["doc_id"])]
        rows.append(
            {"row": row, "label": label, "probs": (p / p.sum()).tolist(), "correct": bool(s["acc"])}
            | ({"correct_norm": bool(s["acc_norm"])} if "acc_norm" in s else {})
        )
    return pd.DataFrame(rows)
