"""Table-1 summary of a grid's accuracies: boost (extra - base), bias (test - extra), per-task tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from harness import results
from harness.core import conditions
from harness.core.power import ALPHA, POWER, RESAMPLES, detectable

# the fewest subsamples whose sign-flip test can reject at ALPHA: its smallest p-value is 2^-K
MIN_SUBSAMPLES = int(np.ceil(np.log2(1 / ALPHA)))
DETECTABLE_METHOD = (
    f"detectable bias (MDE): the smallest mean bias the one-sided paired test (alpha {ALPHA}) finds with "
    f"{POWER:.0%} power, (t_{1 - ALPHA:.2f},K-1 + t_{POWER:.2f},K-1) * sd(test - extra) / sqrt(K), "
    "K subsamples "
    f"(normal approximation with t quantiles); inf below K = {MIN_SUBSAMPLES}, where the sign-flip test's "
    f"smallest p-value, 2^-K, is above {ALPHA}"
)


def bias_pvalue(test: np.ndarray, extra: np.ndarray, seed: int = 0) -> float:
    """Paired permutation test of H1: E[test - extra] > 0 (signs of the differences are permuted)."""
    if len(test) < 2 or np.all(test == extra):
        return 1.0
    res = stats.permutation_test(
        (test, extra),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        alternative="greater",
        n_resamples=RESAMPLES,
        vectorized=True,
        random_state=seed,
    )
    return float(res.pvalue)


def detectable_effect(differences: np.ndarray, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest mean shift of these paired differences that a one-sided test at `alpha` detects
    with probability `power`, from their spread and count (see DETECTABLE_METHOD)."""
    k = len(differences)
    if k < 2 or 0.5**k > alpha:  # the sign-flip test's smallest p-value is 2^-K: it can never reject
        return float("inf")
    return detectable(float(np.std(differences, ddof=1) / np.sqrt(k)), k - 1, alpha, power)


def summarize(df: pd.DataFrame, seed: int = 0) -> dict[str, Any]:
    """The JSON summary: per (m, n, model) and per task means, p-values and BH-adjusted p-values;
    with a leak column, the same for leak - extra (the planted labeled contamination)."""
    for effect, (control, treatment) in conditions.EFFECTS.items():
        if treatment in df.columns and df[treatment].notna().all():
            df = df.assign(**{f"{effect}_effect": df[treatment] - df[control]})
    has_leak = "leak_effect" in df.columns
    configs, tasks = [], []
    for (m, n, model), group in df.groupby(["m", "n", "model"], sort=True):
        per_task = []
        for task, t in group.groupby("task", sort=True):
            row = {
                "m": int(m),
                "n": int(n),
                "model": model,
                "task": task,
                "boost_mean": float(t["boost_effect"].mean()),
                "bias_mean": float(t["bias_effect"].mean()),
                "p_value": bias_pvalue(t[conditions.TEST].to_numpy(), t[conditions.EXTRA].to_numpy(), seed),
                "detectable_bias": detectable_effect(t["bias_effect"].to_numpy()),
            }
            if has_leak:
                row |= {
                    "leak_mean": float(t["leak_effect"].mean()),
                    "leak_p_value": bias_pvalue(
                        t[conditions.LEAK].to_numpy(), t[conditions.EXTRA].to_numpy(), seed
                    ),
                }
            per_task.append(row)
        for key in ("p_value", "leak_p_value") if has_leak else ("p_value",):
            adjusted = stats.false_discovery_control([t[key] for t in per_task], method="bh")
            for t, p in zip(per_task, adjusted):
                t[key.replace("value", "adjusted")] = float(p)
        tasks += per_task
        config = {
            "m": int(m),
            "n": int(n),
            "model": model,
            "boost_mean": float(group["boost_effect"].mean()),
            "bias_mean": float(group["bias_effect"].mean()),
            "tasks": len(per_task),
            "rows": len(group),
            "tasks_positive_bias": sum(t["bias_mean"] > 0 for t in per_task),
            "tasks_negative_bias": sum(t["bias_mean"] < 0 for t in per_task),
            "detectable_bias_median": float(np.median([t["detectable_bias"] for t in per_task])),
        }
        if has_leak:
            config["leak_mean"] = float(group["leak_effect"].mean())
        configs.append(config)
    return {"configs": configs, "tasks": tasks}


def format_tables(summary: dict[str, Any]) -> str:
    """Human-readable tables: one line per (m, n, model), then its tasks (points, MDE included)."""
    lines = [DETECTABLE_METHOD, ""]
    for c in summary["configs"]:
        leak = "leak_mean" in c
        lines.append(
            f"m={c['m']} n={c['n']} model={c['model']}: {c['tasks']} tasks, {c['rows']} rows; "
            f"boost (extra-base) {100 * c['boost_mean']:+.2f} pts, bias (test-extra) "
            f"{100 * c['bias_mean']:+.2f} pts"
            + (f", leak (leak-extra) {100 * c['leak_mean']:+.2f} pts" if leak else "")
            + f"; tasks with bias >0: {c['tasks_positive_bias']}, <0: {c['tasks_negative_bias']}"
        )
        lines.append(
            f"  {'task':34} {'boost':>7} {'bias':>7} {'p':>7} {'p_BH':>7} {'MDE':>6}"
            + (f" {'leak':>7} {'p':>7} {'p_BH':>7}" if leak else "")
        )
        for t in summary["tasks"]:
            if (t["m"], t["n"], t["model"]) == (c["m"], c["n"], c["model"]):
                lines.append(
                    f"  {t['task']:34} {100 * t['boost_mean']:+7.2f} {100 * t['bias_mean']:+7.2f} "
                    f"{t['p_value']:7.4f} {t['p_adjusted']:7.4f} {100 * t['detectable_bias']:6.2f}"
                    + (
                        f" {100 * t['leak_mean']:+7.2f} {t['leak_p_value']:7.4f} {t['leak_p_adjusted']:7.4f}"
                        if leak
                        else ""
                    )
                )
        if np.isfinite(c["detectable_bias_median"]):
            lines.append(
                f"  any task bias above its MDE would have been seen with {POWER:.0%} power; median MDE "
                f"{100 * c['detectable_bias_median']:.2f} pts"
            )
        else:
            lines.append(
                f"  with under {MIN_SUBSAMPLES} subsamples per task no permutation p-value can "
                f"fall below {ALPHA}: "
                "these rows show effects, not evidence; run more subsamples to test them"
            )
        lines.append("")
    return "\n".join(lines)


def prediction_changes(root: str | Path) -> pd.DataFrame:
    """Per task, the share of test documents whose predicted class differs between two conditions:
    each TAPT condition against base, and test (and leak) against extra. A condition that never
    changes a prediction cannot change an accuracy either."""
    tapt = [c for c in conditions.ALL if c != conditions.BASE]
    rows = []
    for task, predicted in results.predictions(root).items():
        pairs = [(c, conditions.BASE) for c in tapt if c in predicted]
        pairs += [(c, conditions.EXTRA) for c in tapt if c != conditions.EXTRA and c in predicted]
        rows.append(
            {
                "task": task,
                "docs": len(predicted),
                **{f"{a}/{b}": float((predicted[a] != predicted[b]).mean()) for a, b in pairs},
            }
        )
    return pd.DataFrame(rows)


def format_changes(changes: pd.DataFrame) -> str:
    pairs = [c for c in changes.columns if "/" in c]
    lines = [
        "share of test predictions that differ between conditions:",
        f"  {'task':34} {'docs':>5} " + " ".join(f"{p:>10}" for p in pairs),
    ]
    for r in changes.to_dict("records"):
        lines.append(f"  {r['task']:34} {r['docs']:5d} " + " ".join(f"{r[p]:10.1%}" for p in pairs))
    return "\n".join(lines)


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
    lines = [
        f"exposure test (test vs extra documents against base; share of units flagged at p <= {ALPHA}): "
        "did the model see the test split's text, its labels?",
        f"  {'task':34} {'bias':>7} {'leak':>7}"
        + "".join(f" | {c + ': text':>11} {'label':>5}" for c in tapt),
    ]
    for s in shares:
        t = effects.get((s["m"], s["n"], s["model"], s["task"]), {})
        bias, leak = (f"{100 * t[k]:+7.2f}" if k in t else f"{'-':>7}" for k in ("bias_mean", "leak_mean"))
        cells = "".join(
            f" | {s[c]['text']:11.0%} {label_share(s[c]):5.0%}" if c in s else f" | {'-':>11} {'-':>5}"
            for c in tapt
        )
        lines.append(f"  {s['task']:34} {bias} {leak}{cells}   ({s['units']} units, m={s['m']} n={s['n']})")
    extra_seen = [s["task"] for s in shares if s.get(conditions.EXTRA, {}).get("extra_text", 0) > 0]
    lines.append(
        "  (extra's own adapter is flagged for extra's text in "
        + (", ".join(extra_seen) if extra_seen else "no task")
        + ": the test's other side; labels of test and leak: the twin statistic, each model's margins on "
        "the text it read against the extra model's)"
    )
    return "\n".join(lines)
