"""The test each (m, n, model) of a summary is read with, and the p-values corrected together: its
confirmatory plan's test, else the one a user names for a folder without a plan (plan_of); a family is
a plan's methods, doses and cells, or the summary's exploratory models (families); Benjamini-Hochberg
within each (corrected); and the simultaneous intervals a sentence about a whole family reads."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.core.design import conditions, study_plan
from harness.core.design.power import ALPHA
from harness.core.plumbing.errors import UserError
from harness.stats.summary.statistics import bh, flip_interval, paired_pvalue
from harness.stats.summary.verdict import key


def paired(rows: pd.DataFrame, effect: str) -> tuple[pd.Series, np.ndarray, np.ndarray]:
    """The rows that measure `effect` (results.measured), and its control and treatment accuracies there."""
    from harness import results

    keep = results.measured(rows, effect)
    control, treatment = (rows.loc[keep, c].to_numpy() for c in conditions.EFFECTS[effect])
    return keep, control, treatment


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
        key(e, "bound_pts"): plan["equivalence_bound"],
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


def cell_of(config: dict) -> tuple[int, int, str]:
    return config["m"], config["n"], config["model"]


def corrected(configs: list[dict]) -> dict[tuple, dict]:
    """Per (m, n, model): `bias_p_family`, its planned p-value Benjamini-Hochberg-corrected over its
    family (families), and the family's size."""
    e, out = conditions.PRIMARY, {}
    for family in families(configs):
        adjusted = bh(np.array([c[key(e, "p_test")] for c in family], float))
        for c, p in zip(family, adjusted):
            out[cell_of(c)] = {key(e, "p_family"): float(p), key(e, "family_size"): len(family)}
    return out


def simultaneous(configs: list[dict], biases: dict, seed: int) -> dict[tuple, dict]:
    """Per (m, n, model) of a family of several: its interval at 1 - (1 - 0.95) / F (Bonferroni over the
    F configs): together they hold every config's true bias with 95% probability, so a sentence about
    all the doses or methods at once reads these (`bias_joint_low`, `bias_joint_high`)."""
    e, out = conditions.PRIMARY, {}
    for family in families(configs):
        if len(family) < 2:
            continue
        confidence = 1 - 0.05 / len(family)
        for c in family:
            low, high = flip_interval(biases[cell_of(c)], seed, confidence)
            out[cell_of(c)] = {
                key(e, "joint_low"): low,
                key(e, "joint_high"): high,
                key(e, "joint_confidence"): confidence,
            }
    return out
