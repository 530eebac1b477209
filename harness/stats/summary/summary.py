"""Table-1 summary of a grid's accuracies: boost (extra - base), bias (test - extra), per-task tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness import results
from harness.core.design import conditions
from harness.core.design.power import TARGET
from harness.core.plumbing.errors import UserError
from harness.stats.summary.control import control_of
from harness.stats.summary.families import cell_of, corrected, paired, plan_of, planned_test, simultaneous
from harness.stats.summary.statistics import (  # noqa: F401
    STATISTICS,
    detectable_effect,
    load_installed,
    paired_pvalue,
)
from harness.stats.summary.verdict import (
    MIN_SUBSAMPLES,
    UNINFORMATIVE,
    collapse_counts,
    key,
    leak_unseen,
    mark,
    pooled_verdict,
)


def of_folder(
    root: str | Path,
    seed: int = 0,
    target: float = TARGET,
    accuracies: pd.DataFrame | None = None,
    chosen: dict | None = None,
    tasks: list[str] | None = None,
    models: list[tuple[int, int, str]] | None = None,
) -> dict[str, Any]:
    """The summary of a results folder: each (m, n, model) read with the plan its run recorded, and told
    whether it is confirmed (summary/confirmation.py); `accuracies`: root's, where already collected;
    `chosen`: the test a user named for folders without a plan (plan_of); `tasks`: read these tasks
    alone, a choice made after the data (post hoc: never confirmed); `models`: these (m, n, model)
    alone."""
    from harness.stats.summary import confirmation

    df = results.collect(root) if accuracies is None else accuracies
    if models:  # these (m, n, model) alone: a run's own, read as summarize reads their folder
        df = df[[cell in set(models) for cell in zip(df["m"], df["n"], df["model"])]]
    if tasks:
        unknown = sorted(set(tasks) - set(df["task"]))
        if unknown:
            raise UserError(
                f"--tasks {' '.join(unknown)}: no such task in {root} (its tasks: "
                f"{', '.join(sorted(set(df['task'])))})"
            )
        df = df[df["task"].isin(tasks)]
    found = confirmation.of_root(root)  # each model folder's manifests and records, read once
    plans = {k: f.pop("config") for k, f in found.items()}
    out = summarize(df, seed=seed, target=target, plans=plans, chosen=chosen)
    folders = results.model_dirs(root)
    for i, config in enumerate(out["configs"]):
        cell = (config["m"], config["n"], config["model"])
        config = config | with_premise(config, folders.get(cell))
        config = out["configs"][i] = config | control_of(config, folders.get(cell), seed)
        config["confirmation"] = found.get(cell)
        if tasks and config["confirmation"]:
            planned = (plans.get(cell) or {}).get("tasks") or []
            config["confirmation"] = confirmation.post_hoc(config["confirmation"], tasks, planned)
    return out


def with_premise(config: dict[str, Any], mdir: Path | None) -> dict[str, Any]:
    """A method that votes on its own labels: its premise's numbers (diagnostics.premise), and where its
    vote is not right more often than the base's own answer on test, that reason beside the verdict, as a
    collapse's (the word stays `inflated` beside a rejection)."""
    from harness.stats.summary.diagnostics import premise, premise_fails, unchecked_premise

    found = premise(mdir) if mdir is not None else {}
    if not found:
        unchecked = unchecked_premise(mdir) if mdir is not None else 0
        return {"premise_unchecked": unchecked} if unchecked else {}
    out = {"premise": found}
    why, e = premise_fails(found), conditions.PRIMARY
    if why and key(e, "units") in config:
        blind = config.get(key(e, UNINFORMATIVE))
        out[key(e, UNINFORMATIVE)] = f"{blind}; {why}" if blind else why
        if key(e, "p_family") in config:
            out |= pooled_verdict(config | out)
    return out


def effects_in(df: pd.DataFrame) -> list[str]:
    """The effects of conditions.EFFECTS whose two conditions every row of these accuracies has."""
    return [e for e, pair in conditions.EFFECTS.items() if all(c in df and df[c].notna().all() for c in pair)]


def summarize(
    df: pd.DataFrame,
    seed: int = 0,
    target: float = TARGET,
    plans: dict | None = None,
    chosen: dict | None = None,
) -> dict[str, Any]:
    """The JSON summary: per (m, n, model) and per task, every statistic of STATISTICS for every effect
    that carries it (`bias_mean`, `bias_p_value`, `bias_p_adjusted` over tasks, `detectable_bias`, ...);
    pooled over every unit of the (m, n, model), those marked pooled, with the primary effect's units and
    its verdict (pooled_verdict): read with the plan a confirmatory config declared (`plans`: (m, n, model)
    -> its config's keys), else with the test `chosen` names (plan_of): by default two-sided at ALPHA
    with the `target` (a fraction) as the bound, the family every (m, n, model) of this summary. The
    bias's p-values, per task and pooled, have the plan's sides. Rows where a condition of an effect was not
    adapted (results.NOT_ADAPTED) are left out of that effect and counted (`bias_not_adapted`); an
    effect with no row left gets each statistic's empty value (NaN: not a measurement)."""
    load_installed()
    effects, primary = effects_in(df), conditions.PRIMARY
    configs, tasks, biases = [], [], {}
    for (m, n, model), group in df.groupby(["m", "n", "model"], sort=True):
        plan, per_task = plan_of(plans, (int(m), int(n), model), target, chosen), []
        for task, t in group.groupby("task", sort=True):
            row = {"m": int(m), "n": int(n), "model": model, "task": task, "rows": len(t)}
            row |= not_adapted_counts(t) | measure(t, effects, seed, pooled=False, sides=plan["sides"])
            per_task.append(row | (collapse_counts(t) | flip_counts(t) if primary in effects else {}))
        per_task = [t | a for t, a in zip(per_task, across_tasks(per_task, effects))]
        if primary in effects:  # a task's bias read from collapsed models, or blind to its leak: no MDE
            per_task = [mark(t) for t in per_task]
        tasks += per_task
        config = {"m": int(m), "n": int(n), "model": model}
        config |= measure(group, effects, seed, pooled=True, sides=plan["sides"])
        if primary in effects:
            per = [t[key(primary, "units")] for t in per_task]
            config[f"{primary}_units_per_task"] = [min(per), max(per)]
            config = mark(config | collapse_counts(group) | flip_counts(group) | leak_per_task(per_task))
            config |= planned_test(group, plan, seed)
            keep, control, treatment = paired(group, primary)
            biases[(int(m), int(n), model)] = treatment - control
        config |= {"tasks": len(per_task), "rows": len(group)} | majority_counts(group)
        if primary in effects:
            config |= {
                key(primary, "tasks_positive"): sum(t[key(primary, "mean")] > 0 for t in per_task),
                key(primary, "tasks_negative"): sum(t[key(primary, "mean")] < 0 for t in per_task),
                key(primary, "detectable_median"): median_mde(per_task),
            }
        configs.append(config)
    added = [corrected(configs), simultaneous(configs, biases, seed)]  # each (m, n, model)'s own keys
    configs = [c | {k: v for a in added for k, v in a.get(cell_of(c), {}).items()} for c in configs]
    configs = [c | pooled_verdict(c) if key(primary, "p_family") in c else c for c in configs]
    return {"configs": configs, "tasks": tasks}


def across_tasks(per_task: list[dict], effects: list[str]) -> list[dict]:
    """Per task, the values of the statistics read across tasks (a multiple-testing correction)."""
    out = [{} for _ in per_task]
    for st in STATISTICS.values():
        for e in [e for e in effects if st.across and st.effects(e)]:
            missing = [t["task"] for t in per_task if st.of.format(e=e) not in t]
            if missing:
                from harness.core.plumbing.plugins import where

                known = sorted(k for k in per_task[0] if k.startswith(f"{e}_") or k.endswith(f"_{e}"))
                raise UserError(
                    f"statistic {st.name(e)!r} ({where(st.across)}) adjusts {st.of.format(e=e)!r}, which no "
                    f"statistic computes for {e} ({', '.join(known)}): name one of those in its `of`"
                )
            values = st.adjusted(e, np.array([t[st.of.format(e=e)] for t in per_task], float))
            for row, v in zip(out, values):
                row[st.name(e)] = float(v)
    return out


def leak_per_task(per_task: list[dict]) -> dict[str, Any]:
    """Where the planted leak was run: the tasks whose units can show it (at least MIN_SUBSAMPLES), and
    those of them where it was not seen (verdict.leak_unseen): a pooled absence is read only where every
    task's own leak was seen."""
    if not per_task or "leak_p_value" not in per_task[0]:
        return {}
    testable = [t for t in per_task if t[key(conditions.PRIMARY, "units")] >= MIN_SUBSAMPLES]
    return {
        "leak_tasks_tested": len(testable),
        "leak_tasks_unseen": [t["task"] for t in testable if leak_unseen(t)],
    }


def majority_counts(rows: pd.DataFrame) -> dict[str, Any]:
    """The units whose base beats the share of its test documents' most frequent class (the study's
    `majority`), of those whose tables say it."""
    if results.TEST_MAJORITY not in rows or conditions.BASE not in rows:
        return {}
    known = rows[results.TEST_MAJORITY].notna()
    above = rows.loc[known, conditions.BASE] > rows.loc[known, results.TEST_MAJORITY] + 1e-9
    return (
        {"base_above_majority": int(above.sum()), "majority_units": int(known.sum())} if known.any() else {}
    )


def flip_counts(rows: pd.DataFrame) -> dict[str, Any]:
    """The test documents the test model gets right and the extra model wrong, and the reverse, summed
    over the units that measure the bias. No test of them: documents of one unit share its models, so
    they are not independent; per unit, the two counts' difference over n is the bias itself, whose test
    counts units."""
    e = conditions.PRIMARY
    keep = results.measured(rows, e)
    if not all(c in rows for c in results.FLIPS) or rows.loc[keep, list(results.FLIPS)].isna().any(axis=None):
        return {}
    test_only, extra_only = (int(rows.loc[keep, c].sum()) for c in results.FLIPS)
    return {key(e, "flips_test_only"): test_only, key(e, "flips_extra_only"): extra_only}


def measure(
    rows: pd.DataFrame, effects: list[str], seed: int, pooled: bool, sides: str = "two"
) -> dict[str, Any]:
    """Every statistic computed from these rows' paired accuracies, per effect (pooled: only those marked
    pooled; units over every task are independent), with the primary effect's unit count; the primary
    effect's tests with `sides` (one: H1 above 0, the study's), the leak's one-sided
    (conditions.ONE_SIDED), the others' two-sided."""
    out = {}
    for e in effects:
        keep, control, treatment = paired(rows, e)
        one = e in conditions.ONE_SIDED or (sides == "one" and e == conditions.PRIMARY)
        alternative = "greater" if one else "two-sided"
        for st in STATISTICS.values():
            if st.compute and st.effects(e) and (not pooled or st.pooled(e)):
                value = st.value(e, treatment, control, seed, alternative) if keep.any() else st.empty
                out[st.name(e)] = value
        if not keep.all():
            out[key(e, "not_adapted")] = int((~keep).sum())
        if e == conditions.PRIMARY:
            out[key(e, "units")] = int(keep.sum())
    return out


def median_mde(per_task: list[dict]) -> float:
    """The median MDE of the informative tasks (an uninformative task has none); NaN where none is."""
    mdes = [t[key(conditions.PRIMARY, "detectable")] for t in per_task]
    mdes = [x for x in mdes if not np.isnan(x)]
    return float(np.median(mdes)) if mdes else float("nan")


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
