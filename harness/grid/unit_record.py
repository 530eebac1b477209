"""What a unit records: its accuracies, per-example scores and the records of what made them, built the
same way by both flows (harness/grid/units.py); and the documents each condition and the exposure test
read."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from contamination.exposure import condition_tests
from harness import results
from harness.core import conditions
from harness.grid.plan import Planned
from harness.scoring import zero_shot
from harness.tasks.protocol import Spec
from tapt import methods


@dataclass
class Unit:
    """One finished (task, subsample) unit: what `results.write_unit` records under the task's dir."""

    slug: str
    k: int
    accs: dict
    probs: pd.DataFrame  # per test document and condition: class probabilities, prediction, correct
    record: dict  # settings, their hash, seconds per stage, training records


def split_docs(docs: dict[str, pd.DataFrame], cond: str) -> pd.DataFrame:
    """The documents a condition adapts on: its split's, with the gold labels only for the leak (the
    column is absent otherwise, so that a method cannot read it)."""
    split, answers = conditions.TAPT[cond]
    return docs[split] if answers else docs[split].drop(columns="label")


def not_adapted(record: dict, scored: pd.DataFrame, base: pd.DataFrame) -> str | None:
    """Why a condition's model is not an adaptation (None when it is): its method learned from no
    document or took no step, or its model scores every test document exactly as the base does."""
    why = methods.nothing_learned(record)
    if why:
        return why
    if np.array_equal(np.stack(scored["probs"].to_numpy()), np.stack(base["probs"].to_numpy())):
        return "scores every test document exactly as the base does"
    return None


def exposure_docs(docs: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The documents the exposure test scores: test's and extra's, with their split."""
    return pd.concat(
        [docs[s].assign(split=s) for s in (conditions.TEST, conditions.EXTRA)], ignore_index=True
    )


def majority(docs: dict[str, pd.DataFrame]) -> dict[str, float]:
    """Accuracy on test of the train subsample's most frequent gold index (ties: the lowest; an lm-eval
    task without a training split: extra's), the most choices a doc has, and the mean chance accuracy."""
    counts = docs["test"]["choices"].map(len)
    known = docs["train"] if len(docs["train"]) else docs[conditions.EXTRA]
    top = int(np.bincount(known["label"], minlength=int(counts.max())).argmax())
    return {
        "majority": float((docs["test"]["label"] == top).mean()),
        "num_classes": int(counts.max()),
        "majority_all": float((1.0 / counts).mean()),
    }


def unit_of(
    unit: Planned,
    spec: Spec,
    docs: dict,
    scored: dict,
    seconds: dict,
    training: dict,
    exposed: dict,
    skipped: dict,
) -> Unit:
    """The unit's accuracies, its per-example probabilities, and what made them (with the conditions
    whose model is not an adaptation, and why)."""
    accs = {cond: float(df["correct"].mean()) for cond, df in scored.items()} | majority(docs)
    probs = pd.concat([df.assign(condition=cond) for cond, df in scored.items()], ignore_index=True)
    record = {
        "settings": unit.recorded,
        "settings_hash": unit.settings_hash,
        "seconds": seconds,
        "training": training,
        "code": unit.cell.code | {"config_hash": unit.cell.config_hash},
    }
    if any(skipped.values()):  # recorded only where a condition was not adapted: older units match
        record[results.NOT_ADAPTED] = {c: why for c, why in skipped.items() if why}
    if all("correct_norm" in df for df in scored.values()):  # the task defines acc_norm too
        record["acc_norm"] = {cond: float(df["correct_norm"].mean()) for cond, df in scored.items()}
    if all("correct_mean_token" in df for df in scored.values()):  # zero-shot: both rules, whichever counts
        record["accuracy_by_rule"] = {
            rule: {cond: float(df[f"correct_{rule}"].mean()) for cond, df in scored.items()}
            for rule in zero_shot.RULES
        }
    if exposed:
        record["exposure"] = condition_tests(
            exposed, conditions.BASE, unit.config.text_score, unit.config.seed
        )
    return Unit(spec.slug, unit.k, accs, probs, record)
