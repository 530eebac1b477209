"""The bias test's answer in words, each word following the interval, and when the design cannot answer.

The words, for the pooled bias of a method (and dose):
- "inflated": the family's corrected test rejects and the bias is above 0 ("deflated" where below);
- "not inflated beyond B": the test does not reject and the two-sided interval ends below B points;
- "inconclusive": neither: the interval reaches B;
- "uninformative": the test does not reject and the design could not have seen a bias (below).

Three cases make a design blind. Where they hold beside a rejection, the word stays "inflated" and the
reason is printed beside it:
- the extra and test models give every test document the same one class (both collapsed, the gold labels
  not all that class) in over COLLAPSED of the units: such models agree by construction;
- the planted leak (TAPT on test with its answers, the positive control) is not seen above 0;
- pooled over tasks: the leak is not seen in some task whose units could show it (MIN_SUBSAMPLES or
  more): a pooled leak carried by a few tasks says nothing of the others, and a pooled absence covers
  them all.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness import results
from harness.core.design import conditions
from harness.core.design.power import ALPHA, units_for
from harness.stats.summary.statistics import plug_in_values

# the fewest subsamples whose two-sided sign-flip test can reject at ALPHA: its smallest p is 2^(1-K)
MIN_SUBSAMPLES = int(np.ceil(np.log2(1 / ALPHA))) + 1
# the largest share of units whose extra and test models may collapse to one class before the bias is not read
COLLAPSED = 0.10
UNINFORMATIVE = "uninformative"
INFLATED, DEFLATED, INCONCLUSIVE = "inflated", "deflated", "inconclusive"
BOUNDED = "not inflated beyond"


PREFIXED = ("detectable", "tasks_positive", "tasks_negative")  # keys the first summaries named effect-last


def key(e: str, name: str) -> str:
    """A summary key of effect `e` (`bias_units`, `bias_one_class`; `detectable_bias`, its MDE, and
    `detectable_bias_median`): one place builds them."""
    if name.startswith(PREFIXED):
        prefix = next(p for p in PREFIXED if name.startswith(p))
        return f"{prefix}_{e}{name[len(prefix) :]}"
    return f"{e}_{name}"


def collapse_counts(rows: pd.DataFrame) -> dict[str, int]:
    """Among the units that measure the bias: those whose extra model, whose test model, and whose both
    models collapsed to the same class (results.ONE_CLASS); and those with no probabilities to check."""
    e = conditions.PRIMARY
    control, treatment = conditions.EFFECTS[e]
    keep = results.measured(rows, e)
    values = (
        list(rows.loc[keep, results.ONE_CLASS]) if results.ONE_CLASS in rows else [None] * int(keep.sum())
    )
    classes = [results.collapsed_classes(v) for v in values]
    both = [control in d and treatment in d and d[control] == d[treatment] for d in classes]
    return {
        key(e, f"one_class_{control}"): sum(control in d for d in classes),
        key(e, f"one_class_{treatment}"): sum(treatment in d for d in classes),
        key(e, "one_class"): sum(both),
        key(e, "unchecked"): sum(not isinstance(v, str) for v in values),
    }


def why_uninformative(row: dict[str, Any]) -> str | None:
    """Why the bias of these units (a task's, or a config's pooled) cannot show an absence, or None."""
    e = conditions.PRIMARY
    control, treatment = conditions.EFFECTS[e]
    units, same = row[key(e, "units")], row.get(key(e, "one_class"), 0)
    if units and same / units > COLLAPSED:
        return (
            f"in {same} of {units} units the {control} and {treatment} models give every test document the "
            "same one class (a generative task's: the same answer to over half of them), the gold labels not "
            f"all that class ({control} alone "
            f"{row[key(e, f'one_class_{control}')]}, {treatment} {row[key(e, f'one_class_{treatment}')]}; "
            f"over {COLLAPSED:.0%} of units): such models agree by construction, so their {e} measures the "
            "collapse"
        )
    p, leak = row.get("leak_p_value", float("nan")), row.get("leak_mean", float("nan"))
    if units >= MIN_SUBSAMPLES and leak_unseen(row):
        return (
            f"the planted leak (the positive control) was not seen above 0: leak {pts(leak)} pts, p {p:.4f}; "
            "a design that misses a planted effect cannot vouch for the absence of one"
        )
    unseen = row.get("leak_tasks_unseen")
    if unseen:
        return (
            f"the planted leak was not seen in {len(unseen)} of the {row['leak_tasks_tested']} tasks whose "
            f"units can show it ({', '.join(unseen)}: p > {ALPHA} or not above 0): the design cannot vouch "
            "for the absence of a bias there, and a pooled absence covers every task"
        )
    return None


def leak_unseen(row: dict[str, Any]) -> bool:
    """Whether these units ran the planted leak and did not see it (two-sided p above ALPHA, or the
    leak not above 0)."""
    p, leak = row.get("leak_p_value", float("nan")), row.get("leak_mean", float("nan"))
    return bool(np.isfinite(p) and (p > ALPHA or leak <= 0))


def mark(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its reason where the design is blind, and no MDE there (it would measure the collapse)."""
    why = why_uninformative(row)
    if why is None:
        return row
    e = conditions.PRIMARY
    return row | {key(e, UNINFORMATIVE): why, key(e, "detectable"): float("nan")}


def pooled_verdict(config: dict[str, Any]) -> dict[str, Any]:
    """The pooled bias's word (see the module's note), read from the family's corrected p-value
    (`bias_p_family`), the test's level (`bias_alpha`), the two-sided interval and the bound in points
    (`bias_bound_pts`)."""
    e = conditions.PRIMARY
    p, mean, high = config[key(e, "p_family")], config[key(e, "mean")], config[key(e, "high")]
    bound, alpha = config[key(e, "bound_pts")], config[key(e, "alpha")]
    verdict = {}
    if np.isfinite(p) and p <= alpha and mean != 0:
        return verdict | {key(e, "verdict"): INFLATED if mean > 0 else DEFLATED}
    if key(e, UNINFORMATIVE) in config:
        return verdict | {key(e, "verdict"): UNINFORMATIVE}
    if np.isfinite(high) and 100 * high < bound:
        return verdict | {key(e, "verdict"): BOUNDED}
    mde = config[key(e, "detectable")]
    if np.isfinite(mde) and mde > 0:
        verdict[key(e, "units_needed")] = units_for(mde, config[key(e, "units")], bound / 100)
    return verdict | {key(e, "verdict"): INCONCLUSIVE}


def pts(x: float) -> str:
    """An effect in points, or n/a where no unit measured it."""
    return f"{100 * x:+.2f}" if np.isfinite(x) else "n/a"


def interval(low: float, high: float) -> str:
    """A two-sided interval in points ([low, high]); unbounded where too few units can reject."""
    if np.isnan(low) or np.isnan(high):
        return "[n/a]"
    if not (np.isfinite(low) and np.isfinite(high)):
        return "[unbounded: too few units]"
    return f"[{round(100 * low, 2) + 0.0:+.2f}, {round(100 * high, 2) + 0.0:+.2f}]"  # no "-0.00"


def mde_text(mde: float) -> str:
    return f"{100 * mde:.2f} pts" if np.isfinite(mde) else ("n/a" if np.isnan(mde) else "inf")


def pooled_line(config: dict[str, Any]) -> str:
    """The pooled bias test in one sentence, its verdict last (the summary and the report both print it)."""
    e = conditions.PRIMARY
    units, mde, bound = config[key(e, "units")], config[key(e, "detectable")], config[key(e, "bound_pts")]
    sides = "one-sided" if config.get(key(e, "sides")) == "one" else "two-sided"
    head = (
        f"pooled over the {units} units of every task: {e} {pts(config[key(e, 'mean')])} pts "
        f"{interval(config[key(e, 'low')], config[key(e, 'high')])} (95%, two-sided), p {sides} "
        f"{config[key(e, 'p_test')]:.4f}, BH over {config[key(e, 'family_size')]} "
        f"{config[key(e, 'p_family')]:.4f}, MDE {mde_text(mde)}"
        + "".join(f", {shown}" for shown in plug_in_values(config, e))
    )
    fewest, most = config[key(e, "units_per_task")]
    if fewest != most:  # the pooled mean weighs each task by its units
        head += f" (tasks of {fewest} to {most} units: the tasks with more weigh more)"
    verdict, blind = config[key(e, "verdict")], config.get(key(e, UNINFORMATIVE))
    if verdict in (INFLATED, DEFLATED):
        said = f"{head}: {verdict} (corrected p <= {config[key(e, 'alpha')]})"
        return said + (f"; the design is {UNINFORMATIVE} of an absence: {blind}" if blind else "")
    if verdict == UNINFORMATIVE:
        return f"{head}: {UNINFORMATIVE}: {blind}"
    if verdict == BOUNDED:
        return f"{head}: {BOUNDED} {bound:g} pts (the interval ends below it)"
    needed = config.get(key(e, "units_needed"))
    more = f"; about {needed} units would bring the MDE to {bound:g} pts" if needed else ""
    if units < MIN_SUBSAMPLES:
        more = f"; under {MIN_SUBSAMPLES} units no two-sided p-value can fall below {ALPHA}"
    return f"{head}: {INCONCLUSIVE} (the interval reaches {bound:g} pts{more})"


def unchecked_line(config: dict[str, Any]) -> str | None:
    """Where some units had no probabilities, the collapse check could not run on them: said, not skipped."""
    k = config.get(key(conditions.PRIMARY, "unchecked"), 0)
    if not k:
        return None
    return (
        f"the collapse check did not run on {k} of {config[key(conditions.PRIMARY, 'units')]} units: "
        "accuracies without probabilities.parquet (made elsewhere); their models may give one class"
    )


def uninformative_lines(tasks: list[dict], indent: str = "  ") -> list[str]:
    """One line per task whose bias cannot show an absence (its MDE column reads n/a)."""
    name = key(conditions.PRIMARY, UNINFORMATIVE)
    return [f"{indent}{t['task']}: {UNINFORMATIVE}: {t[name]}" for t in tasks if name in t]
