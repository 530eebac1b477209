"""Zero-shot scoring through lm-eval: accuracy and per-example class probabilities on one split."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd

from harness.core.errors import UserError
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


def scorer(model, tokenizer, batch_size: int, models: tuple[str, ...] = ()):
    """lm-eval's HF model around an already loaded model (a PEFT-wrapped one included), as `hf-prompt-once`:
    each test prompt read once, every class scored from its cache. `models`: the PEFT model's adapters
    ('__base__' the base) scored together, each prompt under all of them in one forward (`score`'s `as_model`
    then names the one read)."""
    from harness.scoring.prompt_once import PromptOnceLM

    logging.getLogger("lm_eval.models.huggingface").setLevel(logging.ERROR)  # the model-object warning
    lm = PromptOnceLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size)
    lm.continuation_tokens = {}
    lm.models = tuple(models)
    return lm


# How a doc's prediction is read from its choices' log-likelihoods: lm-eval's `acc` (the largest sum of
# a choice's token log-probs) or the study's (CAPPr: the largest mean of them, kddubey/pretrain-on-test
# _dum.py:363-385). They differ only where choices have different token counts.
Rule = Literal["acc", "mean_token"]
RULES = get_args(Rule)


def score(lm, task: EvalTask, rule: Rule = "acc", as_model: str | None = None) -> pd.DataFrame:
    """One row per scored doc: `row` (pool position), `label`, `correct_acc` (lm-eval's acc for that
    doc), `correct_mean_token` (the study's rule), and by `rule` (one of RULES) `correct` and `probs`
    (softmax over the choices' summed or mean log-probs); where the task defines it, `correct_norm`
    (its acc_norm).

    lm-eval's `evaluate`, not `simple_evaluate`: the same requests and metrics without the run
    provenance simple_evaluate adds (a torch environment report that starts subprocesses), which the
    grid records once per run in its manifest instead."""
    from lm_eval.evaluator import evaluate

    lm.scoring_as = as_model
    out = evaluate(
        lm, task.tasks, samples=task.samples, log_samples=True, bootstrap_iters=0, verbosity="ERROR"
    )
    (samples,) = out["samples"].values()
    rows = []
    for s in sorted(samples, key=lambda s: s["doc_id"]):
        ll = np.array([float(r[0]) for r in s["filtered_resps"]])
        mean = ll / np.array([lm.continuation_tokens[tuple(a)] for a in s["arguments"]])
        row, label = task.docs[int(s["doc_id"])]
        drawn = s["doc"].get("row") if isinstance(s.get("doc"), dict) else None
        if drawn is not None and int(drawn) != row:
            raise UserError(  # a tapt_* task's data hook draws the subsample again from its metadata
                f"lm-eval's doc {s['doc_id']} is pool row {int(drawn)}, and the unit's test document there "
                f"is row {row}: the task's data hook and the grid drew different subsamples; check the "
                "task's data and its --metadata"
            )
        by = {"acc": (ll, bool(s["acc"])), "mean_token": (mean, int(mean.argmax()) == label)}
        p = np.exp(by[rule][0] - by[rule][0].max())
        rows.append(
            {"row": row, "label": label, "probs": (p / p.sum()).tolist(), "correct": by[rule][1]}
            | {f"correct_{name}": correct for name, (_, correct) in by.items()}
            | ({"correct_norm": bool(s["acc_norm"])} if "acc_norm" in s else {})
        )
    return pd.DataFrame(rows)
