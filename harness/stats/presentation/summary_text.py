"""The summary as text: the per-(m, n, model) line and its task table (a column per statistic), the MDE
line, the pooled line, the flips, the simultaneous intervals of a family, and the tables of changed
predictions and collapsed models."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness import results
from harness.core.design import conditions
from harness.core.design.power import ALPHA, POWER
from harness.stats.summary.confirmation import line as confirmation_line
from harness.stats.summary.control import control_line
from harness.stats.summary.diagnostics import premise_line, premise_unchecked_line
from harness.stats.summary.families import families
from harness.stats.summary.statistics import STATISTICS
from harness.stats.summary.verdict import (
    MIN_SUBSAMPLES,
    interval,
    key,
    pooled_line,
    pts,
    unchecked_line,
    uninformative_lines,
)

DETECTABLE_METHOD = (
    f"intervals: 95%, two-sided, by inverting the paired sign-flip test (every shift it does not reject); "
    f"detectable bias (MDE): the smallest mean bias the two-sided paired test (alpha {ALPHA}) finds with "
    f"{POWER:.0%} power, (t_{1 - ALPHA / 2:.3f},K-1 + t_{POWER:.2f},K-1) * sd(test - extra) / sqrt(K), "
    "K subsamples "
    f"(normal approximation with t quantiles); inf below K = {MIN_SUBSAMPLES}, where the sign-flip test's "
    f"smallest two-sided p-value, 2^(1-K), is above {ALPHA}, and where every subsample's bias is the same "
    "(no spread to read the power from)"
)


def same_config(task: dict, config: dict) -> bool:
    return (task["m"], task["n"], task["model"]) == (config["m"], config["n"], config["model"])


def not_adapted_lines(tasks: list[dict], indent: str = "  ") -> list[str]:
    """One line per task with units whose method adapted on nothing: counted, and left out."""
    return [
        f"{indent}{t['model']} · {t['task']}: no adaptation in {t['not_adapted_units']} of {t['rows']} "
        "units ("
        + ", ".join(f"{c} {k}" for c, k in t["not_adapted"].items())
        + "): the effects of those conditions leave those units out (n/a where none is left)"
        for t in tasks
        if t.get("not_adapted_units")
    ]


def effect_columns(effects: list[str]) -> list[tuple[str, str, str, str]]:
    """The per-task table's columns after the task, (effect, header, key, kind), from STATISTICS: per
    effect, each statistic that effect carries, in the table's order."""
    return [
        (e, st.header.format(e=e), st.name(e), st.kind)
        for e in effects
        for st in STATISTICS.values()
        if st.effects(e)
    ]


def format_tables(summary: dict[str, Any]) -> str:
    """Human-readable tables: one line per (m, n, model), then its tasks (points, MDE included)."""
    lines = [DETECTABLE_METHOD, ""]
    primary = conditions.PRIMARY
    for c in summary["configs"]:
        effects = [e for e in conditions.EFFECTS if key(e, "mean") in c]
        lines.append(
            f"m={c['m']} n={c['n']} model={c['model']}: {c['tasks']} tasks, {c['rows']} rows; "
            + ", ".join(
                f"{conditions.label(e)} {pts(c[key(e, 'mean')])} pts "
                f"{interval(c[key(e, 'low')], c[key(e, 'high')])}"
                for e in effects
            )
            + (
                f"; tasks with {primary} >0: {c[f'tasks_positive_{primary}']}, "
                f"<0: {c[f'tasks_negative_{primary}']}"
                if primary in effects
                else ""
            )
        )
        tasks = [t for t in summary["tasks"] if same_config(t, c)]
        lines += task_table(c, tasks, effects)
        lines += not_adapted_lines(tasks) + uninformative_lines(tasks)
        lines.append(mde_line(c, tasks))
        if c.get("majority_units"):
            lines.append(
                f"  base above the test subsample's majority share (the study's `majority`) in "
                f"{c['base_above_majority']} of {c['majority_units']} units"
            )
        if c.get("confirmation"):
            lines.append(f"  {confirmation_line(c['confirmation'])}")
            lines += [f"  {line}" for line in draw_lines(c["confirmation"])]
        if c.get("premise"):
            lines.append(f"  {premise_line(c['premise'])}")
        if c.get("premise_unchecked"):
            lines.append(f"  {premise_unchecked_line(c['premise_unchecked'])}")
        if c.get("control"):
            lines.append(f"  {control_line(c['control'])}")
        if c.get(key(primary, "units")):
            lines.append(f"  {pooled_line(c)}")
            lines += [f"  {line}" for line in (flip_line(c), unchecked_line(c)) if line]
        lines.append("")
    lines += joint_lines(summary["configs"])
    return "\n".join(lines)


DRAWS = {
    "balanced": "balanced (int(m / K) rows of each class, the study's draw)",
    results.FIRST_TRAIN_DRAW: "proportional (m rows in the pool's class proportions)",
}


def draw_lines(found: dict[str, Any]) -> list[str]:
    """How the units' train was drawn, as their records say (one from before train_draw: proportional)."""
    draws = found.get("draws") or {}
    return [f"train drawn {DRAWS.get(d, d)} in {k} units" for d, k in sorted(draws.items())]


def task_table(config: dict, tasks: list[dict], effects: list[str]) -> list[str]:
    """One (m, n, model)'s per-task rows, a column per statistic of every effect it carries."""
    width, cells = {"points": 7, "p": 7, "mde": 6}, {"points": "{:+7.2f}", "p": "{:7.4f}", "mde": "{:6.2f}"}
    cols = effect_columns(effects)
    lines = []
    if config.get(key(conditions.PRIMARY, "sides")) == "one":
        lines.append(f"  {conditions.PRIMARY} p and p_BH: one-sided (H1: test above extra, the study's test)")
    lines.append(f"  {'task':34}" + "".join(f" {h:>{width[f]}}" for _, h, _, f in cols))
    for t in tasks:
        shown = [
            cells[f].format(t[k] if f == "p" else 100 * t[k])
            if np.isfinite(t[k])
            else f"{'inf' if f == 'mde' and np.isinf(t[k]) else 'n/a':>{width[f]}}"
            for _, _, k, f in cols
        ]
        lines.append(f"  {t['task']:34}" + "".join(" " + x for x in shown))
    return lines


def mde_line(config: dict, tasks: list[dict]) -> str:
    """What the tasks' MDEs say: the median, or why there is none."""
    primary = conditions.PRIMARY
    median = config.get(key(primary, "detectable_median"), float("inf"))
    if np.isnan(median):
        return f"  no task's {primary} is informative: no MDE"
    if np.isfinite(median):
        return (
            f"  any task {primary} above its MDE would have been seen with {POWER:.0%} power; median MDE "
            f"{100 * median:.2f} pts"
        )
    if any(t["rows"] < MIN_SUBSAMPLES for t in tasks):
        return (
            f"  with under {MIN_SUBSAMPLES} subsamples per task no permutation p-value can fall below "
            f"{ALPHA}: these rows show effects, not evidence; run more subsamples to test them"
        )
    return (
        f"  no MDE for half the tasks or more: their subsamples' {primary} is the same in every one "
        "(the method moved no prediction between the conditions?), which says nothing of the power"
    )


def joint_lines(configs: list[dict]) -> list[str]:
    """Per family of several models (methods, doses, cells), their simultaneous intervals: what a sentence
    about all of them at once may read (each model's own 95% interval may not)."""
    e, out = conditions.PRIMARY, []
    for family in families(configs):
        joint = [c for c in family if key(e, "joint_low") in c]
        if not joint:
            continue
        confidence, bound = joint[0][key(e, "joint_confidence")], joint[0][key(e, "bound_pts")]
        highs = [c[key(e, "joint_high")] for c in joint]
        below = all(np.isfinite(h) and 100 * h < bound for h in highs)
        out.append(
            f"simultaneous 95% intervals of the {e} over the {len(joint)} models of one family (Bonferroni: "
            f"each at {confidence:.2%}), for a sentence about all of them at once:"
        )
        out += [
            f"  m={c['m']} n={c['n']} {c['model']}: "
            f"{interval(c[key(e, 'joint_low')], c[key(e, 'joint_high')])}"
            for c in joint
        ]
        words = "every one ends below" if below else "not every one ends below"
        out += [f"  {words} {bound:g} pts", ""]
    return out


def flip_line(config: dict[str, Any]) -> str | None:
    """Where the pooled bias comes from: documents only the test model gets right, and the reverse (a
    description, not a test: the test is the pooled line's, over units)."""
    e = conditions.PRIMARY
    if key(e, "flips_test_only") not in config:
        return None
    return (
        f"flips over those units: {config[key(e, 'flips_test_only')]} test documents right under test and "
        f"wrong under extra, {config[key(e, 'flips_extra_only')]} the reverse (not a test: a unit's "
        f"documents share its models; per unit the difference over n is its {e}, tested above over units)"
    )


def any_collapsed(collapsed: pd.DataFrame) -> bool:
    """Whether an adapted model answered one class in any unit (base's own collapse is the task's)."""
    adapted = [c for c in conditions.ALL if c in collapsed.columns and c != conditions.BASE]
    return not collapsed.empty and bool((collapsed[adapted] > 0).any(axis=None))


def format_one_class(collapsed: pd.DataFrame) -> str:
    """The one-class table, or nothing where no adapted model answered one class in any unit."""
    if not any_collapsed(collapsed):
        return ""
    title = (
        "share of units whose model gives every test document one class (a generative task's: one answer "
        "to over half of them; collapsed: a bias between two such models does not measure the method's):"
    )
    return share_table(title, collapsed, "units", [c for c in conditions.ALL if c in collapsed.columns], 8, 0)


def format_changes(changes: pd.DataFrame) -> str:
    pairs = [c for c in changes.columns if "/" in c]
    title = "share of test predictions that differ between conditions:"
    return share_table(title, changes, "docs", pairs, 10, 1)


def share_table(
    title: str, frame: pd.DataFrame, count: str, columns: list[str], width: int, digits: int
) -> str:
    """A per-task table of shares (a folder above the model's names its tasks by path)."""
    name = max(34, *frame["task"].map(len))
    lines = [title, f"  {'task':{name}} {count:>5} " + " ".join(f"{c:>{width}}" for c in columns)]
    for r in frame.to_dict("records"):
        cells = " ".join(f"{'-':>{width}}" if pd.isna(r[c]) else f"{r[c]:{width}.{digits}%}" for c in columns)
        lines.append(f"  {r['task']:{name}} {r[count]:5d} " + cells)
    return "\n".join(lines)
