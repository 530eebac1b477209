"""Table-1 summary of a grid's accuracies: boost (extra - base), bias (test - extra), per-task tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from harness import results
from harness.core import conditions
from harness.core.power import ALPHA, POWER, TARGET
from harness.stats.confirmation import line as confirmation_line
from harness.stats.statistics import (  # noqa: F401
    STATISTICS,
    bh,
    detectable_effect,
    load_installed,
    paired_pvalue,
)
from harness.stats.verdict import (
    MIN_SUBSAMPLES,
    collapse_counts,
    interval,
    key,
    mark,
    pooled_line,
    pooled_verdict,
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


def of_folder(
    root: str | Path, seed: int = 0, target: float = TARGET, accuracies: pd.DataFrame | None = None
) -> dict[str, Any]:
    """The summary of a results folder: each (m, n, model) read with the plan its run recorded, and told
    whether it is confirmed (harness.stats.confirmation); `accuracies`: root's, where already collected."""
    from harness.stats import confirmation

    df = results.collect(root) if accuracies is None else accuracies
    found = confirmation.of_root(root)  # each model folder's manifests and records, read once
    out = summarize(df, seed=seed, target=target, plans={k: f.pop("config") for k, f in found.items()})
    for config in out["configs"]:
        config["confirmation"] = found.get((config["m"], config["n"], config["model"]))
    return out


def effects_in(df: pd.DataFrame) -> list[str]:
    """The effects of conditions.EFFECTS whose two conditions every row of these accuracies has."""
    return [e for e, pair in conditions.EFFECTS.items() if all(c in df and df[c].notna().all() for c in pair)]


def summarize(
    df: pd.DataFrame, seed: int = 0, target: float = TARGET, plans: dict | None = None
) -> dict[str, Any]:
    """The JSON summary: per (m, n, model) and per task, every statistic of STATISTICS for every effect
    that carries it (`bias_mean`, `bias_p_value`, `bias_p_adjusted` over tasks, `detectable_bias`, ...);
    pooled over every unit of the (m, n, model), those marked pooled, with the primary effect's units and
    its verdict (pooled_verdict): read with the plan a confirmatory config declared (`plans`: (m, n, model)
    -> its config's keys), else two-sided at ALPHA with the `target` (a fraction) as the bound, the
    family every (m, n, model) of this summary. Rows where a condition of an effect was not
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
            per_task.append(row | (collapse_counts(t) | flip_counts(t) if primary in effects else {}))
        for st in STATISTICS:  # the statistics read across tasks (a multiple-testing correction)
            for e in [e for e in effects if st.across and st.effects(e)]:
                values = st.adjusted(e, np.array([t[st.of.format(e=e)] for t in per_task], float))
                for t, v in zip(per_task, values):
                    t[st.name(e)] = float(v)
        if primary in effects:  # a task's bias read from collapsed models, or blind to its leak: no MDE
            per_task = [mark(t) for t in per_task]
        tasks += per_task
        config = {"m": int(m), "n": int(n), "model": model} | measure(group, effects, seed, pooled=True)
        if primary in effects:
            per = [t[key(primary, "units")] for t in per_task]
            config[f"{primary}_units_per_task"] = [min(per), max(per)]
            config = mark(config | collapse_counts(group) | flip_counts(group))
            config |= planned_test(group, plan_of(plans, config, target), seed)
        config |= {"tasks": len(per_task), "rows": len(group)}
        if primary in effects:
            config |= {
                f"tasks_positive_{primary}": sum(t[f"{primary}_mean"] > 0 for t in per_task),
                f"tasks_negative_{primary}": sum(t[f"{primary}_mean"] < 0 for t in per_task),
                f"detectable_{primary}_median": median_mde(per_task),
            }
        configs.append(config)
    corrected(configs)
    for config in configs:
        if key(primary, "p_family") in config:
            config |= pooled_verdict(config, config.pop("_bound"), config[key(primary, "alpha")])
    return {"configs": configs, "tasks": tasks}


PLAN_KEYS = ("confirmatory", "sides", "alpha", "family", "equivalence_bound")


def plan_of(plans: dict | None, config: dict, target: float) -> dict[str, Any]:
    """The test a config's pooled bias is read with: its confirmatory plan's, else two-sided at ALPHA,
    the family this summary, the bound `target` (a fraction)."""
    declared = (plans or {}).get((config["m"], config["n"], config["model"])) or {}
    if declared.get("confirmatory"):
        return {k: declared[k] for k in PLAN_KEYS}
    return {"confirmatory": False, "sides": "two", "alpha": ALPHA, "family": "config"} | {
        "equivalence_bound": 100 * target
    }


def planned_test(rows: pd.DataFrame, plan: dict, seed: int) -> dict[str, Any]:
    """The pooled bias's p-value by the plan's sides (before the family's correction), and the plan."""
    e = conditions.PRIMARY
    keep, control, treatment = paired(rows, e)
    alternative = "greater" if plan["sides"] == "one" else "two-sided"
    p = paired_pvalue(treatment, control, seed, alternative) if keep.any() else float("nan")
    return {
        key(e, "p_test"): p,
        key(e, "sides"): plan["sides"],
        key(e, "alpha"): plan["alpha"],
        key(e, "family"): plan["family"],
        "_bound": plan["equivalence_bound"],
    }


def corrected(configs: list[dict]) -> None:
    """Each config's `bias_p_family`: its planned p-value, Benjamini-Hochberg-corrected over the configs
    whose family is the summary (every method and dose), or its own where the family is the model."""
    e = conditions.PRIMARY
    together = [c for c in configs if c.get(key(e, "family")) == "config"]
    adjusted = bh(np.array([c[key(e, "p_test")] for c in together], float))
    for c, p in zip(together, adjusted):
        c[key(e, "p_family")], c[key(e, "family_size")] = float(p), len(together)
    for c in configs:
        if key(e, "p_test") in c and key(e, "p_family") not in c:
            c[key(e, "p_family")], c[key(e, "family_size")] = c[key(e, "p_test")], 1


def flip_counts(rows: pd.DataFrame) -> dict[str, Any]:
    """The test documents the test model gets right and the extra model wrong, and the reverse, summed
    over the units that measure the bias, with the two-sided sign test of the two counts."""
    e = conditions.PRIMARY
    keep = results.measured(rows, e)
    if not all(c in rows for c in results.FLIPS) or rows.loc[keep, list(results.FLIPS)].isna().any(axis=None):
        return {}
    test_only, extra_only = (int(rows.loc[keep, c].sum()) for c in results.FLIPS)
    both = test_only + extra_only
    p = float(stats.binomtest(test_only, both).pvalue) if both else 1.0
    return {
        key(e, "flips_test_only"): test_only,
        key(e, "flips_extra_only"): extra_only,
        key(e, "flips_p"): p,
    }


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
            out[key(e, "not_adapted")] = int((~keep).sum())
        if e == conditions.PRIMARY:
            out[key(e, "units")] = int(keep.sum())
    return out


def median_mde(per_task: list[dict]) -> float:
    """The median MDE of the informative tasks (an uninformative task has none); NaN where none is."""
    mdes = [t[f"detectable_{conditions.PRIMARY}"] for t in per_task]
    mdes = [x for x in mdes if not np.isnan(x)]
    return float(np.median(mdes)) if mdes else float("nan")


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
                            else f"{'inf' if f == 'mde' and np.isinf(t[k]) else 'n/a':>{width[f]}}"
                        )
                        for _, _, k, f in cols
                    )
                )
        lines += not_adapted_lines([t for t in summary["tasks"] if same_config(t, c)])
        lines += uninformative_lines([t for t in summary["tasks"] if same_config(t, c)])
        median = c.get(f"detectable_{primary}_median", float("inf"))
        if np.isnan(median):
            lines.append(f"  no task's {primary} is informative: no MDE")
        elif np.isfinite(median):
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
        if c.get("confirmation"):
            lines.append(f"  {confirmation_line(c['confirmation'])}")
        if c.get(key(primary, "units")):
            lines.append(f"  {pooled_line(c)}")
            lines += [f"  {line}" for line in (flip_line(c), unchecked_line(c)) if line]
        lines.append("")
    return "\n".join(lines)


def flip_line(config: dict[str, Any]) -> str | None:
    """Where the pooled bias comes from: documents only the test model gets right, and the reverse."""
    e = conditions.PRIMARY
    if key(e, "flips_p") not in config:
        return None
    return (
        f"flips over those units: {config[key(e, 'flips_test_only')]} test documents right under test and "
        f"wrong under extra, {config[key(e, 'flips_extra_only')]} the reverse (sign test, two-sided, "
        f"p {config[key(e, 'flips_p')]:.4f})"
    )


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
    """Per task, the share of units in which each condition's model gives every test document one class
    where the gold labels are not all that class (results.collapsed): a collapsed model."""
    rows = []
    for task, probs in results.probabilities(root).items():
        units = results.predicted(probs).groupby("subsample")
        found = [results.collapsed_classes(results.collapsed(unit)) for _, unit in units]
        present = [c for c in conditions.ALL if c in set(probs["condition"])]
        shares = {c: float(np.mean([c in f for f in found])) for c in present}
        rows.append({"task": task, "units": len(found), **shares})
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
