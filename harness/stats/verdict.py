"""The bias test's answer, and when the design cannot give one.

A verdict of "not inflated" is worth what the design could see. Two cases make it mean nothing:
- the extra or test model gives every test document one class (a collapsed model): two such models agree
  by construction, so their bias is 0 and its spread small, whatever the method does;
- the planted leak (TAPT on test with its answers, the positive control) is not seen: the design missed
  an effect planted on purpose, so its silence on the bias says nothing.
Where either holds the answer is "uninformative", with the counts, and no MDE is given.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness import results
from harness.core import conditions
from harness.core.power import ALPHA, POWER, units_for

# the fewest subsamples whose sign-flip test can reject at ALPHA: its smallest p-value is 2^-K
MIN_SUBSAMPLES = int(np.ceil(np.log2(1 / ALPHA)))
# the largest share of units whose extra or test model may answer one class before the bias is not read
COLLAPSED = 0.10
UNINFORMATIVE = "uninformative"


def collapse_counts(rows: pd.DataFrame) -> dict[str, int]:
    """Among the units that measure the bias, those whose extra model, test model, or either gives every
    test document one class (results.ONE_CLASS)."""
    e = conditions.PRIMARY
    keep = results.measured(rows, e)
    if results.ONE_CLASS not in rows:  # accuracies read without their probabilities: nothing to count
        rows = rows.assign(**{results.ONE_CLASS: ""})
    listed = rows.loc[keep, results.ONE_CLASS].fillna("").astype(str).str.split(",")
    has = {c: listed.map(lambda x, c=c: c in x) for c in conditions.EFFECTS[e]}
    either = has[conditions.EXTRA] | has[conditions.TEST]
    counts = {f"{e}_one_class_{c}": int(v.sum()) for c, v in has.items()}
    return counts | {f"{e}_one_class": int(either.sum())}


def why_uninformative(row: dict[str, Any]) -> str | None:
    """Why the bias of these units (a task's, or a config's pooled) says nothing of the method, or None."""
    e = conditions.PRIMARY
    units, collapsed = row[f"{e}_units"], row.get(f"{e}_one_class", 0)
    if units and collapsed / units > COLLAPSED:
        control, treatment = conditions.EFFECTS[e]
        return (
            f"in {collapsed} of {units} units the {control} or {treatment} model gives every test document "
            f"one class ({control} {row[f'{e}_one_class_{control}']}, {treatment} "
            f"{row[f'{e}_one_class_{treatment}']}; over {COLLAPSED:.0%} of units): two such models agree by "
            f"construction, so their {e} and its spread measure the collapse, not the method"
        )
    p = row.get("leak_p_value", float("nan"))
    if units >= MIN_SUBSAMPLES and np.isfinite(p) and p > ALPHA:
        return (
            f"the planted leak (the positive control) was not seen: leak {100 * row['leak_mean']:+.2f} pts, "
            f"p {p:.4f} > {ALPHA}; a design that misses a planted effect cannot vouch for the absence of one"
        )
    return None


def mark(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its reason where it is uninformative, and no MDE there (it would measure the collapse)."""
    why = why_uninformative(row)
    if why is None:
        return row
    e = conditions.PRIMARY
    return row | {f"{e}_{UNINFORMATIVE}": why, f"detectable_{e}": float("nan")}


def pooled_verdict(config: dict[str, Any], target: float) -> dict[str, Any]:
    """The pooled bias test's answer (`bias_verdict`): uninformative (why_uninformative), inflated
    (p <= ALPHA), not inflated beyond the MDE (the MDE at most `target`), or not powered to see `target`
    (then, where the MDE is finite, about how many units would be)."""
    e = conditions.PRIMARY
    mde, p = config[f"detectable_{e}"], config[f"{e}_p_value"]
    verdict = {f"{e}_target": target}
    if f"{e}_{UNINFORMATIVE}" in config:
        return verdict | {f"{e}_verdict": UNINFORMATIVE}
    if np.isfinite(p) and p <= ALPHA:
        return verdict | {f"{e}_verdict": "inflated"}
    if mde <= target:
        return verdict | {f"{e}_verdict": "not inflated beyond the MDE"}
    if np.isfinite(mde):
        verdict[f"{e}_units_needed"] = units_for(mde, config[f"{e}_units"], target)
    return verdict | {f"{e}_verdict": "not powered"}


def pts(x: float) -> str:
    """An effect in points, or n/a where no unit measured it."""
    return f"{100 * x:+.2f}" if np.isfinite(x) else "n/a"


def mde_text(mde: float) -> str:
    return f"{100 * mde:.2f} pts" if np.isfinite(mde) else ("n/a" if np.isnan(mde) else "inf")


def pooled_line(config: dict[str, Any]) -> str:
    """The pooled bias test in one sentence, its verdict last (the summary and the report both print it)."""
    e = conditions.PRIMARY
    units, mde, target = config[f"{e}_units"], config[f"detectable_{e}"], config[f"{e}_target"]
    head = (
        f"pooled over the {units} units of every task: {e} {pts(config[f'{e}_mean'])} pts, "
        f"p {config[f'{e}_p_value']:.4f}, MDE {mde_text(mde)}"
    )
    fewest, most = config[f"{e}_units_per_task"]
    if fewest != most:  # the pooled mean weighs each task by its units
        head += f" (tasks of {fewest} to {most} units: the tasks with more weigh more)"
    verdict = config[f"{e}_verdict"]
    if verdict == UNINFORMATIVE:
        return f"{head}: {UNINFORMATIVE}: {config[f'{e}_{UNINFORMATIVE}']}"
    if verdict == "inflated":
        return f"{head}: inflated (p <= {ALPHA})"
    if verdict != "not powered":
        return f"{head}: not inflated beyond the MDE (a {e} that large is seen with {POWER:.0%} power)"
    if np.isfinite(mde):
        return (
            f"{head}: not powered to see {100 * target:.0f} pts; about {config[f'{e}_units_needed']} units "
            "would be (4x the units halve the MDE)"
        )
    if units < MIN_SUBSAMPLES:
        return f"{head}: not powered (under {MIN_SUBSAMPLES} units no p-value can fall below {ALPHA})"
    return (
        f"{head}: not powered (every unit's {e} is the same, no spread to read a power from: did the method "
        "move any prediction between the conditions?)"
    )


def uninformative_lines(tasks: list[dict], indent: str = "  ") -> list[str]:
    """One line per task whose bias says nothing of the method (its MDE column reads n/a)."""
    key = f"{conditions.PRIMARY}_{UNINFORMATIVE}"
    return [f"{indent}{t['task']}: {UNINFORMATIVE}: {t[key]}" for t in tasks if key in t]
