"""The exposure test's shares in a grid's summary: per task and TAPT condition, the share of units whose
model was seen to have read the test split's text, its labels (and, the other side, extra's text)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from harness.core.design import conditions
from harness.core.design.power import ALPHA
from harness.stats.summary.verdict import key


def exposure_shares(tests: pd.DataFrame) -> list[dict[str, Any]]:
    """Per (m, n, model, task) and TAPT condition: the share of units whose model the exposure test
    flags at its alpha for the test split's text, its labels, and (the other side) extra's text."""
    out = []
    if tests.empty:
        return out
    tapt = [c for c in conditions.ALL if c != conditions.BASE]
    for (m, n, model, task), group in tests.groupby(["m", "n", "model", "task"], sort=True):
        row = {
            "m": int(m),
            "n": int(n),
            "model": model,
            "task": task,
            "units": int(group["subsample"].nunique()),
        }
        for cond in tapt:
            t = group[group["condition"] == cond]
            if len(t):
                stats_ = [c.removesuffix("_p_test") for c in t.columns if c.endswith("_p_test")]
                row[cond] = {
                    s: float((t[f"{s}_p_test"] <= t["alpha"]).mean())
                    for s in stats_
                    if t[f"{s}_p_test"].notna().any()
                } | {"extra_text": float((t["text_p_extra"] <= t["alpha"]).mean())}
        out.append(row)
    return out


def label_share(cond_shares: dict[str, float]) -> float:
    """The labels' share a condition is read by: the twin statistic where the unit had one (a model that
    read test, against the extra model on the text it read), else the single-model margin."""
    return cond_shares.get("label_twin", cond_shares["label"])


def format_exposure(shares: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    """One line per task: its bias (and leak) beside the share of units whose TAPT models were seen
    to have read the test text and its labels."""
    if not shares:
        return ""
    effects = {(t["m"], t["n"], t["model"], t["task"]): t for t in summary["tasks"]}
    tapt = [c for c in conditions.ALL if c != conditions.BASE and any(c in s for s in shares)]
    shown = conditions.READ_TEST  # the effects of the models that read test
    codec = any("codec" in s.get(c, {}) for s in shares for c in tapt)  # CoDeC too, where the grid ran it
    lines = [
        f"exposure test (test vs extra documents against base; share of units flagged at p <= {ALPHA}): "
        "did the model see the test split's text, its labels?",
        f"  {'task':34}"
        + "".join(f" {e:>7}" for e in shown)
        + "".join(f" | {c + ': text':>11} {'label':>5}" + (f" {'CoDeC':>5}" if codec else "") for c in tapt),
    ]
    several = len({s["model"] for s in shares}) > 1  # methods side by side: a heading per model
    for s, before in zip(shares, [None, *shares]):
        if several and (before is None or before["model"] != s["model"]):
            lines.append(f"  {s['model']}:")
        t = effects.get((s["m"], s["n"], s["model"], s["task"]), {})
        keys = [key(e, "mean") for e in shown]
        means = "".join(f" {100 * t[k]:+7.2f}" if k in t else f" {'-':>7}" for k in keys)
        cells = "".join(
            (f" | {s[c]['text']:11.0%} {label_share(s[c]):5.0%}" if c in s else f" | {'-':>11} {'-':>5}")
            + ((f" {s[c]['codec']:5.0%}" if "codec" in s.get(c, {}) else f" {'-':>5}") if codec else "")
            for c in tapt
        )
        lines.append(f"  {s['task']:34}{means}{cells}   ({s['units']} units, m={s['m']} n={s['n']})")
    extra_seen = [
        s["task"] + (f" ({s['model']})" if several else "")
        for s in shares
        if s.get(conditions.EXTRA, {}).get("extra_text", 0) > 0
    ]
    lines.append(
        "  (extra's own adapter is flagged for extra's text in "
        + ("every task" if len(extra_seen) == len(shares) else ", ".join(extra_seen) or "no task")
        + ": the test's other side; labels of test and leak: the twin statistic, each model's margins on "
        "the text it read against the extra model's)"
    )
    return "\n".join(lines)
