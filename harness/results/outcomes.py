"""What a unit's models did to test, read from its probabilities: each document's predicted class, the
models that gave every document one class, and the documents that flip between test and extra."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.design import conditions
from harness.results.paths import read_table

# per unit, the test documents the test model gets right and the extra model wrong, and the reverse
FLIPS = ("flips_test_only", "flips_extra_only")


def flips(unit: pd.DataFrame) -> dict[str, float]:
    """A unit's test documents that the test model gets right and the extra model wrong, and the
    reverse: where a bias comes from (NaN where the unit has no test or extra model)."""
    if not {"row", "correct"} <= set(unit.columns):  # a table written without them: no flips to count
        return dict.fromkeys(FLIPS, np.nan)
    right = unit.pivot_table(index="row", columns="condition", values="correct", aggfunc="first")
    if not {conditions.TEST, conditions.EXTRA} <= set(right.columns):
        return dict.fromkeys(FLIPS, np.nan)
    test, extra = right[conditions.TEST].astype(bool), right[conditions.EXTRA].astype(bool)
    return {FLIPS[0]: float((test & ~extra).sum()), FLIPS[1]: float((extra & ~test).sum())}


ONE_ANSWER = 0.5  # a generative model that gives one answer to more than this share of test is collapsed


def answer_id(answer: str) -> int:
    """A generated answer as a number (ONE_CLASS holds numbers): equal answers, equal numbers."""
    return int(hashlib.sha256(answer.encode()).hexdigest()[:8], 16)


def collapsed(unit: pd.DataFrame) -> str:
    """A unit's collapsed models as 'condition=class,...': each condition whose model gives every test
    document one class where the gold labels are not all that class (a model right on a test split of
    one class is not collapsed). A generative task's twin: a model whose extracted answer (or no answer)
    is the same on over ONE_ANSWER of test, where the gold answers are not so (its class: answer_id)."""
    out = []
    for cond in conditions.ALL:
        rows = unit[unit["condition"] == cond]
        if not len(rows):
            continue
        if "gold" in rows:  # generative
            answers, gold = rows["answer"].fillna("").astype(str), rows["gold"].astype(str)
            top, share = answers.value_counts().index[0], answers.value_counts().iloc[0] / len(rows)
            if share > ONE_ANSWER and gold.value_counts().iloc[0] / len(rows) <= ONE_ANSWER:
                out.append(f"{cond}={answer_id(top)}")
            continue
        classes = set(rows["pred"])
        gold = set(rows["label"]) if "label" in rows else set()  # a table without labels: unknown
        if len(classes) == 1 and gold != classes:
            out.append(f"{cond}={classes.pop()}")
    return ",".join(out)


def test_majority(unit: pd.DataFrame) -> float:
    """The share of a unit's test documents in their most frequent class (a generative task's: gold
    answer), read from one condition's rows; NaN where the table holds no labels."""
    rows = unit[unit["condition"] == unit["condition"].iloc[0]]
    gold = rows["gold"].astype(str) if "gold" in rows else rows.get("label")
    return (
        float(gold.value_counts(normalize=True).iloc[0]) if gold is not None and len(gold) else float("nan")
    )


def collapsed_classes(value: str | None) -> dict[str, int]:
    """ONE_CLASS read back: {condition: the class its model gave every document}."""
    if not isinstance(value, str) or not value:
        return {}
    pairs = (item.partition("=") for item in value.split(","))
    return {cond: int(cls) for cond, _, cls in pairs if cls}


def predicted(probs: pd.DataFrame) -> pd.DataFrame:
    """The probabilities with each document's predicted class (`pred`: the most probable; a generative
    task's: its extracted answer)."""
    if "answer" in probs:
        return probs.assign(pred=probs["answer"].fillna("").astype(str))
    return probs.assign(pred=probs["probs"].map(np.argmax))


def predictions(root: str | Path) -> dict[str, pd.DataFrame]:
    """Per task folder under root, by its path from root (a model folder's: the task's name; a higher
    root's: `m<m>/n<n>/<model>/<task>`): the predicted class of every test document (rows: subsample,
    row; columns: the conditions)."""
    out = {}
    for path in sorted(Path(root).rglob("probabilities.parquet")):
        probs = read_table(path)
        out[path.parent.relative_to(root).as_posix()] = predicted(probs).pivot_table(
            index=["subsample", "row"], columns="condition", values="pred", aggfunc="first"
        )
    return out
