"""What a unit records (`UnitRecord`): its accuracies, per-example scores and the records of what made
them, built the same way by both flows (grid/unit/flows/); one condition's outcome in the zero-shot flow
(`Step`); and the documents each condition and the exposure test read."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from contamination.exposure import condition_tests
from harness import results
from harness.core.design import conditions
from harness.core.plumbing.errors import UserError
from harness.grid.unit import fingerprints
from harness.grid.unit.unit_plan import UnitKey, UnitPlan
from harness.scoring import zero_shot
from harness.tasks.protocol import unlabeled
from harness.tasks.subsample import majority_share
from tapt import methods


@dataclass(frozen=True)
class UnitRecord:
    """One finished unit: what `results.write_unit` records under its task's folder."""

    key: UnitKey
    accs: dict
    probs: pd.DataFrame  # per test document and condition: class probabilities, prediction, correct
    record: dict  # settings, their hash, seconds per stage, training records


def problem(record: UnitRecord, conditions_run: list[str]) -> str | None:
    """Why a flow's unit record cannot be written (None where it can): each condition's accuracy a number
    in [0, 1], and every test document's `correct` true or false (a flow plug-in's `compute` returns
    what it returns: checked, as a detector's p-values are)."""
    for cond in conditions_run:
        value = record.accs.get(cond)
        if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
            return f"its accuracy of {cond} is {value!r}, not a number from 0 to 1"
    probs = record.probs
    if "correct" not in probs or "condition" not in probs:
        return "its per-document table has no `correct` or `condition` column (build it with record_of)"
    odd = probs["correct"][~probs["correct"].map(lambda x: isinstance(x, bool | np.bool_))]
    if len(odd):
        return f"`correct` holds {odd.iloc[0]!r} for a test document: it must be True or False for each"
    return None


@dataclass(frozen=True)
class Step:
    """One condition's outcome: lm-eval's scores of test, the exposure test's record, the method's record,
    why its model is not an adaptation (None where it is), and the seconds of each stage."""

    scored: pd.DataFrame
    exposed: pd.DataFrame | None = None
    training: dict | None = None
    skipped: str | None = None
    seconds: dict = field(default_factory=dict)
    gold: list | None = None  # log p of each test document's gold answer (where a leak is planted)


def split_docs(docs: dict[str, pd.DataFrame], cond: str) -> pd.DataFrame:
    """The documents a condition adapts on: its split's, with the gold labels only for the leak (the
    column is absent otherwise, so that a method cannot read it). A generative task's gold answer is
    its one choice: there `answer` and `choices` go too. The leak reads test's documents, each once, as
    test does: its strength plants more of each answer in them (Inputs.leak_strength), never more
    documents or steps, so that leak differs from test by the labels alone."""
    split, answers = conditions.TAPT[cond]
    return docs[split] if answers else unlabeled(docs[split])


def leak_strength(plan: UnitPlan, cond: str) -> int:
    """How many times each of the condition's documents is followed by its answer (1 but for the leak)."""
    return plan.grid.leak_strength if cond == conditions.LEAK else 1


def not_adapted(record: dict, scored: pd.DataFrame, base: pd.DataFrame) -> str | None:
    """Why a condition's model is not an adaptation (None when it is): its method learned from no
    document or took no step, or its model scores every test document exactly as the base does."""
    why = methods.nothing_learned(record)
    if why:
        return why
    if "generated" in scored:  # a generative task: the same text on every document
        if scored["generated"].tolist() == base["generated"].tolist():
            return "generates every test document's text exactly as the base does"
        return None
    if np.array_equal(np.stack(scored["probs"].to_numpy()), np.stack(base["probs"].to_numpy())):
        return "scores every test document exactly as the base does"
    return None


def exposure_docs(docs: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The documents the exposure test scores: test's and extra's, with their split."""
    return pd.concat(
        [docs[s].assign(split=s) for s in (conditions.TEST, conditions.EXTRA)], ignore_index=True
    )


def majority(docs: dict[str, pd.DataFrame], pool_share: float, generative: bool = False) -> dict[str, float]:
    """The study's columns (kddubey/pretrain-on-test, experiment.py): `majority`, the share of the test
    subsample's most frequent gold answer; `majority_all`, the pool's (`pool_share`); `num_classes`, the
    most choices a doc has (0 for a generative task). Beside them, under their own names, what this tool
    wrote as `majority` and `majority_all` before 2026-12-06: `train_majority`, the accuracy on test of
    train's most frequent gold answer (ties: the lowest; no training split: extra's), and `chance`, the
    mean of 1/K (a generative task's: the test's most frequent gold answer share)."""
    known = docs["train"] if len(docs["train"]) else docs[conditions.EXTRA]
    if generative:
        gold = docs["test"]["choices"].map(lambda c: str(c[0]))
        top = known["choices"].map(lambda c: str(c[0])).value_counts().index[0]
        share = majority_share(gold)
        return {
            "majority": share,
            "num_classes": 0,
            "majority_all": pool_share,
            "train_majority": float((gold == top).mean()),
            "chance": share,
        }
    counts = docs["test"]["choices"].map(len)
    top = int(np.bincount(known["label"], minlength=int(counts.max())).argmax())
    return {
        "majority": majority_share(docs["test"]["label"]),
        "num_classes": int(counts.max()),
        "majority_all": pool_share,
        "train_majority": float((docs["test"]["label"] == top).mean()),
        "chance": float((1.0 / counts).mean()),
    }


def draw_record(plan: UnitPlan, docs: dict[str, pd.DataFrame]) -> dict:
    """How train was drawn, and its rows per class (empty for a task whose choices differ by doc)."""
    classes = plan.spec.classes
    counts = np.bincount(docs["train"]["label"], minlength=len(classes)) if classes else []
    return {"train": plan.sample.train_draw, "train_counts": [int(c) for c in counts]}


def answer_shares(scored: pd.DataFrame) -> dict:
    """A generative model's most common extracted answer on test, its share, the share of empty answers,
    and the mean length of the generated text (characters)."""
    answers = scored["answer"].fillna("").astype(str)
    counts = answers.value_counts()
    return {
        "most_common": str(counts.index[0]),
        "share": float(counts.iloc[0] / len(answers)),
        "empty_share": float((answers.str.strip() == "").mean()),
        "mean_length": float(scored["length"].mean()),
    }


def other_rows(scored: pd.DataFrame, test: pd.DataFrame) -> str | None:
    """How a condition's scored rows differ from the unit's test documents (None where they are the same,
    each once)."""
    if "row" not in scored:
        return "have no `row` column (the pool row of each test document)"
    got, want = scored["row"].tolist(), set(test["row"].tolist())
    extra = [r for r in got if r not in want]
    if extra:
        return f"hold row {extra[0]!r}, not one of its test documents ({len(extra)} such)"
    if len(got) != len(set(got)) or set(got) != want:
        return f"cover {len(set(got))} of its {len(want)} test documents in {len(got)} rows"
    return None


def check_scores(plan: UnitPlan, cond: str, df: pd.DataFrame, test: pd.DataFrame) -> None:
    """A condition's scores, as a flow returned them: a True or False `correct` for each of the unit's
    test documents, once; else one line naming the flow, and nothing of the unit written."""
    odd = (
        df["correct"][~df["correct"].map(lambda x: isinstance(x, bool | np.bool_))]
        if "correct" in df
        else None
    )
    if odd is None or len(odd):
        held = "no `correct` column" if odd is None else f"`correct` holds {odd.iloc[0]!r}"
        raise UserError(
            f"flow {plan.grid.flow}: {plan.key.slug} subsample {plan.key.k}: {cond}'s scores have {held} "
            "for a test document: it must be True or False for each; nothing of it is written. Fix the "
            "flow's compute"
        )
    wrong = other_rows(df, test)
    if wrong:
        raise UserError(
            f"flow {plan.grid.flow}: {plan.key.slug} subsample {plan.key.k}: {cond}'s scores {wrong}: a "
            "condition scores each of the unit's test documents once; nothing of it is written. Fix the "
            "flow's compute"
        )


def record_of(
    plan: UnitPlan,
    docs: dict,
    scored: dict,
    seconds: dict,
    training: dict,
    exposed: dict,
    skipped: dict,
    base_from: str | None = None,
    gold: dict | None = None,
) -> UnitRecord:
    """The unit's accuracies, its per-example probabilities, and what made them (with the conditions
    whose model is not an adaptation, and why; `base_from`: the model folder whose unit of the same
    documents scored the base, where this unit read its scores; `gold`: each condition's log p of every
    test document's gold answer, the leak's manipulation check)."""
    for cond, df in scored.items():
        check_scores(plan, cond, df, docs["test"])
    generative = any("answer" in df for df in scored.values())
    pool_hash, pool_majority = plan.pool or (None, plan.spec.pool_majority(plan.sample))
    shares = majority(docs, pool_majority, generative)
    accs = {cond: float(df["correct"].mean()) for cond, df in scored.items()} | shares
    probs = pd.concat([df.assign(condition=cond) for cond, df in scored.items()], ignore_index=True)
    record = {
        "settings": plan.recorded,
        "settings_hash": plan.settings_hash,
        "seconds": seconds,
        "training": training,
        "code": plan.code,
        "draw": draw_record(plan, docs),
        "inputs": fingerprints.of_unit(plan.spec, docs, plan.weights, plan.sample, pool_hash),
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
    if generative:  # the generative twin of the one-class check: each model's most common answer
        record["answers"] = {cond: answer_shares(df) for cond, df in scored.items()}
    if exposed:
        record["exposure"] = condition_tests(
            exposed, conditions.BASE, plan.exposure_test.text_score, plan.stream("exposure")
        )
    if base_from:
        record["base_from"] = base_from
    if conditions.LEAK in scored:
        record[results.CONTROL] = control_record(training, gold or {})
    return UnitRecord(plan.key, accs, probs, record)


def training_of(training: dict, cond: str) -> dict:
    """A condition's training record, whichever flow wrote it (the classifier's `pretrain_<cond>`)."""
    return training.get(cond) or training.get(f"pretrain_{cond}") or {}


def control_record(training: dict, gold: dict) -> dict:
    """What the planted leak's reading needs: each adapted condition's optimizer steps and tokens read (the
    leak differs from its twin, test, in its labels alone where they match), and each condition's log p of
    every test document's gold answer (did the leak model absorb the answers: the manipulation check)."""
    steps, seen = {}, {}
    for cond in (conditions.EXTRA, conditions.TEST, conditions.LEAK):
        rec = training_of(training, cond)
        steps[cond] = rec.get("steps")
        tokens = rec.get("tokens_seen")
        if tokens is None and rec.get("tokens") is not None:
            tokens = round(rec["tokens"] * (rec.get("epochs") or 1))
        seen[cond] = tokens
    return {
        "steps": steps,
        "tokens_seen": seen,
        "gold_log_probs": {c: list(map(float, v)) for c, v in gold.items()},
    }
