"""Zero-shot scoring through lm-eval: accuracy and per-example class probabilities on one split."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd

from harness.core.plumbing.errors import UserError
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
    if samples and "filtered_resps" in samples[0] and isinstance(samples[0]["filtered_resps"][0], str):
        return generated(samples, task)
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


def generated(samples: list[dict], task: EvalTask) -> pd.DataFrame:
    """A generative task's rows, read through its first filter (its filter_list's order): `answer` (the
    filtered answer), `gold` (the target), `generated` (the raw text), `length` (its characters),
    `correct` (the task's first metric is 1: exact_match), and `probs` [1.0] (a generation has no
    distribution over choices; the collapse check reads `answer`)."""
    first = samples[0].get("filter")
    rows = []
    for s in sorted((s for s in samples if s.get("filter") == first), key=lambda s: s["doc_id"]):
        metric = s["metrics"][0]
        value = float(s[metric])
        if value not in (0.0, 1.0):
            raise UserError(
                f"{metric} of doc {s['doc_id']} is {value}, not 0 or 1: the design reads a generated "
                "answer as right or wrong; score the task by exact_match"
            )
        row, label = task.docs[int(s["doc_id"])]
        raw = s["resps"][0][0] if s["resps"] and s["resps"][0] else ""
        rows.append(
            {
                "row": row,
                "label": label,
                "probs": [1.0],
                "correct": value == 1.0,
                "answer": str(s["filtered_resps"][0]),
                "gold": str(s["target"]),
                "generated": str(raw),
                "length": len(str(raw)),
            }
        )
    return pd.DataFrame(rows)
