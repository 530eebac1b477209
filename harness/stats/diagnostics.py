"""What each method did in each condition, from its units' training records: the documents it learned
from, its optimizer steps, and what a method reports of itself (test-time RL: its votes' agreement with
the gold labels, its mean reward, the shares of prompt groups with zero advantage, of samples naming no
choice and of votes decided by a tie; TLM: the inputs it selected; self-training: the pseudo-labels it
kept and their agreement with the gold labels: "label accuracy", measured by the grid for any method
that records the labels it made up). Averaged over the units of each (cell, model folder, task,
condition); a key no unit recorded is left out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from harness import results
from harness.core import conditions

DIAGNOSTICS = {  # a training record's key -> its column (a list is averaged first)
    "learned_from": "learned from",
    "steps": "steps",
    "selected": "selected",
    "kept": "kept",
    "label_accuracy": "label accuracy",
    "mean_reward": "mean reward",
    "zero_advantage_share": "zero advantage",
    "unmatched_share": "unmatched",
    "tie_share": "tied votes",
}


def number(value) -> float | None:
    if isinstance(value, list):
        values = [v for v in value if isinstance(v, int | float) and not isinstance(v, bool)]
        return float(np.mean(values)) if values else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def method_records(root: str | Path) -> pd.DataFrame:
    """One row per (m, n, model, task, condition): the mean of each diagnostic over its units."""
    rows = []
    for path in sorted(Path(root).rglob("units/*.json")):
        match = results.UNIT_LAYOUT.search(path.as_posix())
        if not match:
            continue
        m, n, model, task, _ = match.groups()
        for key, record in results.read_unit(path).get("training", {}).items():
            cond = key.removeprefix("pretrain_")  # the classifier flow's adaptation of the backbone
            if cond not in conditions.ALL or not isinstance(record, dict):
                continue
            values = {col: number(record.get(k)) for k, col in DIAGNOSTICS.items()}
            rows.append({"m": int(m), "n": int(n), "model": model, "task": task, "condition": cond, **values})
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame(rows).dropna(axis=1, how="all")
    keys = ["m", "n", "model", "task", "condition"]
    return df.groupby(keys, sort=False).mean(numeric_only=True).reset_index()


def share(column: str) -> bool:
    return column in ("label accuracy", "zero advantage", "unmatched", "tied votes")


def format_records(df: pd.DataFrame) -> str:
    if df.empty:
        return ""
    columns = [c for c in DIAGNOSTICS.values() if c in df.columns]
    wide = max(34, *df["model"].map(len))
    lines = [
        "what each method did, per condition (means over units):",
        f"  {'model':{wide}} {'task':24} {'condition':9} " + " ".join(f"{c:>14}" for c in columns),
    ]
    for r in df.to_dict("records"):
        cells = [
            f"{'-':>14}" if pd.isna(r[c]) else f"{r[c]:14.1%}" if share(c) else f"{r[c]:14.3g}"
            for c in columns
        ]
        lines.append(f"  {r['model']:{wide}} {r['task']:24} {r['condition']:9} " + " ".join(cells))
    return "\n".join(lines)
