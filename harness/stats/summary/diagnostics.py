"""What each method did in each condition, from its units' training records: what the grid measures of
every method (the documents it learned from, its optimizer steps, the agreement of labels it made up
with the gold ones) and what the method reports of itself, as its `Method.diagnostics` names it (each
record carries that map). Averaged over the units of each (cell, model folder, task, condition); a key
no unit recorded is left out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from harness import results
from harness.core.design import conditions

MEASURED = {  # what the grid records of every method: record key -> column
    "learned_from": "learned from",
    "steps": "steps",
    "label_accuracy": "label accuracy",  # the labels a method made up, against the gold ones
    # where it voted: its premise, each against the gold answers of the documents it adapted on
    "vote_accuracy": "maj@N",
    "greedy_accuracy": "base greedy",
    "sample_accuracy": "one sample",
    "unreadable_share": "unreadable",
}
PREMISE = ("vote_accuracy", "greedy_accuracy", "sample_accuracy", "unreadable_share", "tie_share")
RECORDED = "diagnostics"  # a record's own map of what its method reports (tapt.methods.Method.diagnostics)
# The maps of the built-in methods' records written before a record carried its own
EARLIER = {"selected": "selected", "kept": "kept", "mean_reward": "mean reward"} | {
    "zero_advantage_share": "zero advantage",
    "unmatched_share": "unmatched",
    "tie_share": "tied votes",
}


def shown(record: dict) -> dict[str, str]:
    """Record key -> column, for what the grid measures and what the record's method reports."""
    own = record.get(RECORDED)
    return MEASURED | (own if isinstance(own, dict) else {k: v for k, v in EARLIER.items() if k in record})


def number(value) -> float | None:
    if isinstance(value, list):
        values = [v for v in value if isinstance(v, int | float) and not isinstance(v, bool)]
        return float(np.mean(values)) if values else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def movement(record: dict) -> dict[str, float]:
    """How far the condition's model moved from the base (its record's `moved`): the norm of the weight
    change its LoRA layers add and how many of them add one, or how many of the base's tensors changed."""
    moved = record.get("moved")
    if not isinstance(moved, dict):
        return {}
    if "norm" in moved:
        return {
            "moved (norm)": number(moved["norm"]),
            "layers moved": number(moved["layers"] - moved["unmoved_layers"]),
        }
    return {"tensors changed": number(moved.get("changed_tensors"))}


def method_records(root: str | Path) -> pd.DataFrame:
    """One row per (m, n, model, task, condition): the mean of each diagnostic over its units."""
    rows, shares = [], set()
    for path in results.unit_files(root):
        match = results.UNIT_LAYOUT.search(path.as_posix())
        if not match:
            continue
        m, n, model, task, _ = match.groups()
        for key, record in results.read_unit(path).get("training", {}).items():
            cond = key.removeprefix("pretrain_")  # the classifier flow's adaptation of the backbone
            if cond not in conditions.ALL or not isinstance(record, dict):
                continue
            columns = shown(record)
            values = {col: number(record.get(k)) for k, col in columns.items()} | movement(record)
            shares |= {col for k, col in columns.items() if k.endswith(("_share", "_accuracy"))}
            rows.append({"m": int(m), "n": int(n), "model": model, "task": task, "condition": cond, **values})
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame(rows).dropna(axis=1, how="all")
    keys = ["m", "n", "model", "task", "condition"]
    out = df.groupby(keys, sort=False).mean(numeric_only=True).reset_index()
    out.attrs["shares"] = sorted(shares & set(out.columns))
    return out


def columns(df: pd.DataFrame) -> list[str]:
    """The diagnostics' columns of `method_records`, in the order first recorded."""
    return [c for c in df.columns if c not in ("m", "n", "model", "task", "condition")]


def share(df: pd.DataFrame, column: str) -> bool:
    """Whether a column is a share (shown as a percentage)."""
    return column in df.attrs.get("shares", [])


def format_records(df: pd.DataFrame) -> str:
    if df.empty:
        return ""
    shown_columns = columns(df)
    wide = max(34, *df["model"].map(len))
    lines = [
        "what each method did, per condition (means over units):",
        f"  {'model':{wide}} {'task':24} {'condition':9} " + " ".join(f"{c:>14}" for c in shown_columns),
    ]
    for r in df.to_dict("records"):
        cells = [
            f"{'-':>14}" if pd.isna(r[c]) else f"{r[c]:14.1%}" if share(df, c) else f"{r[c]:14.3g}"
            for c in shown_columns
        ]
        lines.append(f"  {r['model']:{wide}} {r['task']:24} {r['condition']:9} " + " ".join(cells))
    return "\n".join(lines)


def premise(mdir: Path) -> dict[str, dict[str, float]]:
    """Per condition of a model folder whose method voted on its own labels and recorded its premise
    (tapt.methods.vote_agreement): each premise number over every unit, weighted by the documents it was
    read on, and those documents; empty where no unit recorded one."""
    sums: dict[str, dict[str, float]] = {}
    for path in results.unit_files(mdir):
        for name, record in results.read_unit(path).get("training", {}).items():
            docs = record.get("premise_documents") if isinstance(record, dict) else None
            if name not in conditions.ALL or not docs:
                continue
            found = sums.setdefault(name, {"documents": 0.0})
            found["documents"] += docs
            for k in PREMISE:
                if isinstance(record.get(k), int | float):
                    found[k] = found.get(k, 0.0) + docs * record[k]
    return {
        c: {"documents": f["documents"]} | {k: v / f["documents"] for k, v in f.items() if k in PREMISE}
        for c, f in sums.items()
    }


def unchecked_premise(mdir: Path) -> int:
    """The units of a model folder whose method voted on its own labels (its record's `votes`) and
    recorded no premise: written before the premise was recorded (on a multiple-choice task, before
    2026-12-07)."""
    count = 0
    for path in results.unit_files(mdir):
        training = results.read_unit(path).get("training", {})
        records = [r for c, r in training.items() if c in conditions.ALL and isinstance(r, dict)]
        voted = any(r.get("votes") for r in records)
        count += voted and not any(r.get("premise_documents") for r in records)
    return count


def premise_unchecked_line(units: int) -> str:
    return (
        f"premise: not checked: {units} unit(s) of this method voted on their own labels and recorded no "
        "premise (the vote against the base's own answer): units written before it was recorded (on a "
        "multiple-choice task, before the version of 2026-12-07); the bias is read without it"
    )


def premise_fails(found: dict[str, dict[str, float]]) -> str | None:
    """Why a method's premise does not hold where the bias is read (on test's documents: the vote is not
    right more often than the base's own greedy answer), with its numbers; None where it holds or was not
    recorded."""
    test = found.get(conditions.TEST)
    if not test or "vote_accuracy" not in test or "greedy_accuracy" not in test:
        return None
    if test["vote_accuracy"] > test["greedy_accuracy"]:
        return None
    than = (
        "no more often right than"
        if test["vote_accuracy"] == test["greedy_accuracy"]
        else "less often right than"
    )
    return (
        f"the method's premise does not hold: its vote of the samples (maj@N) is right on "
        f"{test['vote_accuracy']:.1%} of test's documents, the base's own greedy answer on "
        f"{test['greedy_accuracy']:.1%}: it rewards agreement with labels {than} the model's "
        "answer, so its bias says little of the method where it can work"
    )


def premise_line(found: dict[str, dict[str, float]]) -> str | None:
    """The premise's numbers per condition, in one line."""
    if not found:
        return None
    names = {
        "vote_accuracy": "maj@N",
        "greedy_accuracy": "base greedy",
        "sample_accuracy": "one sample",
        "tie_share": "ties",
        "unreadable_share": "unreadable",
    }
    parts = [
        f"{c} ({f['documents']:.0f} docs): "
        + ", ".join(f"{n} {f[k]:.1%}" for k, n in names.items() if k in f)
        for c, f in found.items()
    ]
    said = "premise (the vote against the base's own answer, on the documents each condition adapted on): "
    why = premise_fails(found)
    return (
        said + "; ".join(parts) + (f": {why}" if why else ": it holds on test (the vote is right more often)")
    )
