"""Table-1 summary of a grid's accuracies: boost (extra - base), bias (test - extra), per-task tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness import results
from harness.core import conditions
from harness.core.power import ALPHA, POWER, TARGET, units_for
from harness.stats.statistics import STATISTICS, detectable_effect, load_installed, paired_pvalue  # noqa: F401

# the fewest subsamples whose sign-flip test can reject at ALPHA: its smallest p-value is 2^-K
MIN_SUBSAMPLES = int(np.ceil(np.log2(1 / ALPHA)))
DETECTABLE_METHOD = (
    f"detectable bias (MDE): the smallest mean bias the one-sided paired test (alpha {ALPHA}) finds with "
    f"{POWER:.0%} power, (t_{1 - ALPHA:.2f},K-1 + t_{POWER:.2f},K-1) * sd(test - extra) / sqrt(K), "
    "K subsamples "
    f"(normal approximation with t quantiles); inf below K = {MIN_SUBSAMPLES}, where the sign-flip test's "
    f"smallest p-value, 2^-K, is above {ALPHA}, and where every subsample's bias is the same (no spread "
    "to read the power from)"
)


def effects_in(df: pd.DataFrame) -> list[str]:
    """The effects of conditions.EFFECTS whose two conditions every row of these accuracies has."""
    return [e for e, pair in conditions.EFFECTS.items() if all(c in df and df[c].notna().all() for c in pair)]


def summarize(df: pd.DataFrame, seed: int = 0, target: float = TARGET) -> dict[str, Any]:
    """The JSON summary: per (m, n, model) and per task, every statistic of STATISTICS for every effect
    that carries it (`bias_mean`, `bias_p_value`, `bias_p_adjusted` over tasks, `detectable_bias`, ...);
    pooled over every unit of the (m, n, model), those marked pooled, with the primary effect's units and
    its verdict against the `target` effect (pooled_verdict). Rows where a condition of an effect was not
    adapted (results.NOT_ADAPTED) are left out of that effect and counted (`bias_not_adapted`); an
    effect with no row left gets each statistic's empty value (NaN: not a measurement)."""
    load_installed()
    effects, primary = effects_in(df), conditions.PRIMARY
    configs, tasks = [], []
    for (m, n, model), group in df.groupby(["m", "n", "model"], sort=True):
        per_task = []
        for task, t in group.groupby("task", sort=True):
            row = {"m": int(m), "n": int(n), "model": model, "task": task, "rows": len(t)}
            row |= not_adapted_counts(t) | measure(t, effects, seed, pooled=False)
            per_task.append(row)
        for st in STATISTICS:  # the statistics read across tasks (a multiple-testing correction)
            for e in [e for e in effects if st.across and st.effects(e)]:
                values = st.adjusted(e, np.array([t[st.of.format(e=e)] for t in per_task], float))
                for t, v in zip(per_task, values):
                    t[st.name(e)] = float(v)
        tasks += per_task
        config = {"m": int(m), "n": int(n), "model": model} | measure(group, effects, seed, pooled=True)
        if primary in effects:
            per = [t[f"{primary}_units"] for t in per_task]
            config[f"{primary}_units_per_task"] = [min(per), max(per)]
            config |= pooled_verdict(config, target)
        config |= {"tasks": len(per_task), "rows": len(group)}
        if primary in effects:
            config |= {
                f"tasks_positive_{primary}": sum(t[f"{primary}_mean"] > 0 for t in per_task),
                f"tasks_negative_{primary}": sum(t[f"{primary}_mean"] < 0 for t in per_task),
                f"detectable_{primary}_median": float(
                    np.median([t[f"detectable_{primary}"] for t in per_task])
                ),
            }
        configs.append(config)
    return {"configs": configs, "tasks": tasks}


def measure(rows: pd.DataFrame, effects: list[str], seed: int, pooled: bool) -> dict[str, Any]:
    """Every statistic computed from these rows' paired accuracies, per effect (pooled: only those marked
    pooled; units over every task are independent), with the primary effect's unit count."""
    out = {}
    for e in effects:
        keep, control, treatment = paired(rows, e)
        for st in STATISTICS:
            if st.compute and st.effects(e) and (not pooled or st.pooled(e)):
                out[st.name(e)] = st.value(e, treatment, control, seed) if keep.any() else st.empty
        if not keep.all():
            out[f"{e}_not_adapted"] = int((~keep).sum())
        if e == conditions.PRIMARY:
            out[f"{e}_units"] = int(keep.sum())
    return out


def pooled_verdict(config: dict[str, Any], target: float) -> dict[str, Any]:
    """The pooled bias test's answer (`bias_verdict`): inflated (p <= ALPHA), not inflated beyond the
    MDE (the MDE at most `target`), or not powered to see `target` (then, where the MDE is finite, about
    how many units would be)."""
    e = conditions.PRIMARY
    mde, p = config[f"detectable_{e}"], config[f"{e}_p_value"]
    verdict = {f"{e}_target": target}
    if np.isfinite(p) and p <= ALPHA:
        return verdict | {f"{e}_verdict": "inflated"}
    if mde <= target:
        return verdict | {f"{e}_verdict": "not inflated beyond the MDE"}
    if np.isfinite(mde):
        verdict[f"{e}_units_needed"] = units_for(mde, config[f"{e}_units"], target)
    return verdict | {f"{e}_verdict": "not powered"}


def pooled_line(config: dict[str, Any]) -> str:
    """The pooled bias test in one sentence, its verdict last (the summary and the report both print it)."""
    e = conditions.PRIMARY
    units, mde, target = config[f"{e}_units"], config[f"detectable_{e}"], config[f"{e}_target"]
    head = (
        f"pooled over the {units} units of every task: {e} {pts(config[f'{e}_mean'])} pts, "
        f"p {config[f'{e}_p_value']:.4f}, MDE " + (f"{100 * mde:.2f} pts" if np.isfinite(mde) else "inf")
    )
    fewest, most = config[f"{e}_units_per_task"]
    if fewest != most:  # the pooled mean weighs each task by its units
        head += f" (tasks of {fewest} to {most} units: the tasks with more weigh more)"
    verdict = config[f"{e}_verdict"]
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


def paired(rows: pd.DataFrame, effect: str) -> tuple[pd.Series, np.ndarray, np.ndarray]:
    """The rows that measure `effect` (results.measured), and its control and treatment accuracies there."""
    keep = results.measured(rows, effect)
    control, treatment = (rows.loc[keep, c].to_numpy() for c in conditions.EFFECTS[effect])
    return keep, control, treatment


def not_adapted_counts(rows: pd.DataFrame) -> dict[str, Any]:
    """The units of these rows with a condition that was not adapted, and how many per condition."""
    if results.NOT_ADAPTED not in rows or not (rows[results.NOT_ADAPTED] != "").any():
        return {}
    listed = rows[results.NOT_ADAPTED].str.split(",")
    per_condition = {c: int(listed.map(lambda x, c=c: c in x).sum()) for c in conditions.ALL}
    return {
        "not_adapted_units": int((rows[results.NOT_ADAPTED] != "").sum()),
        "not_adapted": {c: k for c, k in per_condition.items() if k},
    }


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
        (e, st.header.format(e=e), st.name(e), st.kind) for e in effects for st in STATISTICS if st.effects(e)
    ]


def format_tables(summary: dict[str, Any]) -> str:
    """Human-readable tables: one line per (m, n, model), then its tasks (points, MDE included)."""
    lines = [DETECTABLE_METHOD, ""]
    primary = conditions.PRIMARY
    width = {"points": 7, "p": 7, "mde": 6}
    for c in summary["configs"]:
        effects = [e for e in conditions.EFFECTS if f"{e}_mean" in c]
        lines.append(
            f"m={c['m']} n={c['n']} model={c['model']}: {c['tasks']} tasks, {c['rows']} rows; "
            + ", ".join(f"{conditions.label(e)} {pts(c[f'{e}_mean'])} pts" for e in effects)
            + (
                f"; tasks with {primary} >0: {c[f'tasks_positive_{primary}']}, "
                f"<0: {c[f'tasks_negative_{primary}']}"
                if primary in effects
                else ""
            )
        )
        cols = effect_columns(effects)
        lines.append(f"  {'task':34}" + "".join(f" {h:>{width[f]}}" for _, h, _, f in cols))
        for t in summary["tasks"]:
            if same_config(t, c):
                cells = {"points": "{:+7.2f}", "p": "{:7.4f}", "mde": "{:6.2f}"}
                lines.append(
                    f"  {t['task']:34}"
                    + "".join(
                        " "
                        + (
                            cells[f].format(t[k] if f == "p" else 100 * t[k])
                            if np.isfinite(t[k])
                            else f"{'n/a' if f != 'mde' else 'inf':>{width[f]}}"
                        )
                        for _, _, k, f in cols
                    )
                )
        lines += not_adapted_lines([t for t in summary["tasks"] if same_config(t, c)])
        median = c.get(f"detectable_{primary}_median", float("inf"))
        if np.isfinite(median):
            lines.append(
                f"  any task {primary} above its MDE would have been seen with {POWER:.0%} power; median MDE "
                f"{100 * median:.2f} pts"
            )
        elif any(t["rows"] < MIN_SUBSAMPLES for t in summary["tasks"] if same_config(t, c)):
            lines.append(
                f"  with under {MIN_SUBSAMPLES} subsamples per task no permutation p-value can "
                f"fall below {ALPHA}: "
                "these rows show effects, not evidence; run more subsamples to test them"
            )
        else:
            lines.append(
                f"  no MDE for half the tasks or more: their subsamples' {primary} is the same in every one "
                "(the method moved no prediction between the conditions?), which says nothing of the power"
            )
        if c.get(f"{primary}_units"):
            lines.append(f"  {pooled_line(c)}")
        lines.append("")
    return "\n".join(lines)


def pts(x: float) -> str:
    """An effect in points, or n/a where no unit measured it."""
    return f"{100 * x:+.2f}" if np.isfinite(x) else "n/a"


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


def one_class(root: str | Path) -> pd.DataFrame:
    """Per task, the share of units in which each condition's model gives every test document the same
    class: a collapsed model. A bias between two collapsed models says nothing of the method's bias."""
    rows = []
    for task, predicted in results.predictions(root).items():
        units = predicted.groupby(level="subsample").nunique() == 1
        rows.append({"task": task, "units": len(units), **units.mean().to_dict()})
    return pd.DataFrame(rows)


def any_collapsed(collapsed: pd.DataFrame) -> bool:
    """Whether an adapted model answered one class in any unit (base's own collapse is the task's)."""
    adapted = [c for c in conditions.ALL if c in collapsed.columns and c != conditions.BASE]
    return not collapsed.empty and bool((collapsed[adapted] > 0).any(axis=None))


def format_one_class(collapsed: pd.DataFrame) -> str:
    """The one-class table, or nothing where no adapted model answered one class in any unit."""
    if not any_collapsed(collapsed):
        return ""
    title = (
        "share of units whose model gives every test document one class (collapsed: a bias between two "
        "such models does not measure the method's):"
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
