"""Table-1 summary of a grid's accuracies: boost (extra - base), bias (test - extra), per-task tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness import results
from harness.core import conditions, study_plan
from harness.core.errors import UserError
from harness.core.power import ALPHA, POWER, TARGET
from harness.stats.confirmation import line as confirmation_line
from harness.stats.statistics import (  # noqa: F401
    STATISTICS,
    bh,
    detectable_effect,
    flip_interval,
    load_installed,
    paired_pvalue,
)
from harness.stats.verdict import (
    MIN_SUBSAMPLES,
    collapse_counts,
    interval,
    key,
    leak_unseen,
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
    root: str | Path,
    seed: int = 0,
    target: float = TARGET,
    accuracies: pd.DataFrame | None = None,
    chosen: dict | None = None,
    tasks: list[str] | None = None,
    models: list[tuple[int, int, str]] | None = None,
) -> dict[str, Any]:
    """The summary of a results folder: each (m, n, model) read with the plan its run recorded, and told
    whether it is confirmed (harness.stats.confirmation); `accuracies`: root's, where already collected;
    `chosen`: the test a user named for folders without a plan (plan_of); `tasks`: read these tasks
    alone, a choice made after the data (post hoc: never confirmed); `models`: these (m, n, model)
    alone."""
    from harness.stats import confirmation

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
    for config in out["configs"]:
        cell = (config["m"], config["n"], config["model"])
        config["confirmation"] = found.get(cell)
        if tasks and config["confirmation"]:
            planned = (plans.get(cell) or {}).get("tasks") or []
            config["confirmation"] = confirmation.post_hoc(config["confirmation"], tasks, planned)
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
        for st in STATISTICS.values():  # the statistics read across tasks (a multiple-testing correction)
            for e in [e for e in effects if st.across and st.effects(e)]:
                values = st.adjusted(e, np.array([t[st.of.format(e=e)] for t in per_task], float))
                for t, v in zip(per_task, values):
                    t[st.name(e)] = float(v)
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
        config |= {"tasks": len(per_task), "rows": len(group)}
        if primary in effects:
            config |= {
                f"tasks_positive_{primary}": sum(t[f"{primary}_mean"] > 0 for t in per_task),
                f"tasks_negative_{primary}": sum(t[f"{primary}_mean"] < 0 for t in per_task),
                f"detectable_{primary}_median": median_mde(per_task),
            }
        configs.append(config)
    corrected(configs)
    simultaneous(configs, biases, seed)
    for config in configs:
        if key(primary, "p_family") in config:
            config |= pooled_verdict(config, config.pop("_bound"), config[key(primary, "alpha")])
    return {"configs": configs, "tasks": tasks}


PLAN_KEYS = ("confirmatory", "sides", "alpha", "family", "equivalence_bound")


CHOSEN_FLAGS = {"sides": "--sides", "alpha": "--alpha", "family": "--family", "equivalence_bound": "--target"}


def plan_of(plans: dict | None, cell: tuple[int, int, str], target: float, chosen: dict | None) -> dict:
    """The test the bias of (m, n, model) `cell` is read with: its confirmatory plan's; else the one
    `chosen` names (sides, alpha, family, equivalence_bound: the keys of a plan, None where not given),
    by default two-sided at ALPHA, the family this summary, the bound `target` (a fraction). A chosen
    value that differs from a plan's is refused: a confirmatory result is read with its plan alone."""
    declared = (plans or {}).get(cell) or {}
    chosen = {k: v for k, v in (chosen or {}).items() if v is not None}
    if declared.get("confirmatory"):
        clash = [k for k, v in chosen.items() if v != declared[k]]
        if clash:
            named = ", ".join(f"{CHOSEN_FLAGS[k]} {chosen[k]} (the plan's: {declared[k]})" for k in clash)
            m, n, model = cell
            raise UserError(
                f"m{m}/n{n}/{model} is a confirmatory study, read with the test its plan fixed before it "
                f"ran; {named} would read another: drop {', '.join(CHOSEN_FLAGS[k] for k in clash)}"
            )
        return {k: declared[k] for k in PLAN_KEYS} | {"family_of": study_plan.family_hash(declared)}
    default = {"sides": "two", "alpha": ALPHA, "family": "config", "equivalence_bound": 100 * target}
    return {"confirmatory": False, "family_of": "exploratory"} | default | chosen


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
        key(e, "family_of"): plan["family_of"],
        "_bound": plan["equivalence_bound"],
    }


def families(configs: list[dict]) -> list[list[dict]]:
    """The configs whose p-values are corrected together: those of one confirmatory plan (its config's
    methods, doses and cells; never a model of another run in the same folder), and the exploratory
    ones of this summary; a config whose family is the model stands alone."""
    e, groups = conditions.PRIMARY, {}
    for c in configs:
        if key(e, "p_test") in c:
            together = c[key(e, "family")] == "config"
            groups.setdefault(c[key(e, "family_of")] if together else id(c), []).append(c)
    return list(groups.values())


def corrected(configs: list[dict]) -> None:
    """Each config's `bias_p_family`: its planned p-value, Benjamini-Hochberg-corrected over its family
    (families), and the family's size."""
    e = conditions.PRIMARY
    for family in families(configs):
        adjusted = bh(np.array([c[key(e, "p_test")] for c in family], float))
        for c, p in zip(family, adjusted):
            c[key(e, "p_family")], c[key(e, "family_size")] = float(p), len(family)


def simultaneous(configs: list[dict], biases: dict, seed: int) -> None:
    """For a family of several configs, each one's interval at 1 - (1 - 0.95) / F (Bonferroni over
    the F configs): together they hold every config's true bias with 95% probability, so a sentence
    about all the doses or methods at once reads these (`bias_joint_low`, `bias_joint_high`)."""
    e = conditions.PRIMARY
    for family in families(configs):
        if len(family) < 2:
            continue
        confidence = 1 - 0.05 / len(family)
        for c in family:
            d = biases[(c["m"], c["n"], c["model"])]
            c[key(e, "joint_low")], c[key(e, "joint_high")] = flip_interval(d, seed, confidence)
            c[key(e, "joint_confidence")] = confidence


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
    effect's tests with `sides` (one: H1 above 0, the study's), the others' two-sided."""
    out = {}
    for e in effects:
        keep, control, treatment = paired(rows, e)
        alternative = "greater" if sides == "one" and e == conditions.PRIMARY else "two-sided"
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
        (e, st.header.format(e=e), st.name(e), st.kind)
        for e in effects
        for st in STATISTICS.values()
        if st.effects(e)
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
        if c.get(key(primary, "sides")) == "one":
            lines.append(f"  {primary} p and p_BH: one-sided (H1: test above extra, the study's test)")
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
    lines += joint_lines(summary["configs"])
    return "\n".join(lines)


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
