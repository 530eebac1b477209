"""What the pilot reads from its units to size a plan: the bias's spread and the plan's K, the leak's power
at K from the lower bound of its mean, and the manipulation check (harness.study.pilot)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness import results
from harness.core.design import conditions
from harness.core.design.power import POWER, mde_at, power_at, units_for_bound
from harness.core.plumbing.errors import UserError
from harness.grid.configuration.config import GridConfig


@dataclass(frozen=True)
class Leak:
    """One strength's pooled leak over the entered tasks' pilot units, and its power at the plan's K read
    from the one-sided 95% lower bound of its mean (the mean alone reads a lucky pilot as the effect)."""

    strength: int
    units: int
    mean: float  # points
    sd: float
    power: float  # at the lower bound: what the plan may count on
    low: float = float("nan")  # the one-sided 95% lower bound of the mean, points
    power_at_mean: float = float("nan")
    absorbed: dict | None = None  # the manipulation check over the same units (harness.stats.summary.control)


def per_task_floor(alpha: float, sides: str) -> int:
    """The fewest units a task needs for its own sign-flip test to reach alpha (its smallest p is 2^-u,
    twice that two-sided)."""
    u = 1
    while (2.0 if sides == "two" else 1.0) * 0.5**u > alpha:
        u += 1
    return u


def per_task_after_bh(alpha: float, sides: str, subsamples: int, tasks: int) -> bool:
    """Whether a task's own test, alone among `tasks`, can reject after BH at `subsamples` units: its
    smallest sign-flip p (2^-u, twice that two-sided) times the tasks."""
    return (2.0 if sides == "two" else 1.0) * 0.5**subsamples * tasks <= alpha


def differences(folder: Path, effect: str, tasks: list[str]) -> np.ndarray:
    """One effect's per-unit differences, in points, over the units of `tasks` in a model folder."""
    control, treatment = conditions.EFFECTS[effect]
    out = []
    for task in tasks:
        for unit in results.finished(folder / task).values():
            out.append(100 * (unit[treatment] - unit[control]))
    return np.array(out)


def absorbed_text(found: dict) -> str:
    from harness.stats.summary import control

    return control.absorbed_numbers(found)


def absorption(folder: Path, tasks: list[str]) -> dict | None:
    """The manipulation check over the pilot units of `tasks` (None where they recorded none)."""
    from harness.stats.summary import control  # scipy: loaded where a pilot reads its units, not for --help

    units = [u for u in control.unit_controls(folder) if u["task"] in tasks and "leak" in u]
    if len(units) < 2:
        return None
    found = control.control_of({"leak_mean": 0.0}, folder)["control"]
    return found if "checked" in found else None


def sized(cfg: GridConfig, bias: np.ndarray, entered: int) -> dict[str, Any]:
    """The plan's units from the pilot's spread: K for the bound, a task's floor, rounded up to whole
    subsamples a task."""
    p = cfg.plan
    sd = float(np.std(bias, ddof=1)) if len(bias) > 1 else float("nan")
    if not math.isfinite(sd):
        raise UserError(
            "the pilot needs at least 2 units of entered tasks to read a spread: add --subsamples"
        )
    if sd == 0:
        raise UserError(
            f"the {len(bias)} pilot units of the entered tasks all have the same bias ({bias[0]:+.2f} "
            "points): a spread of 0 sizes no plan (every K would look enough); add --subsamples"
        )
    for_bound = units_for_bound(sd, p.equivalence_bound, p.alpha, POWER, p.sides)
    floor = per_task_floor(p.alpha, p.sides)
    each = max(floor, math.ceil(for_bound / entered))
    return {
        "sd": sd,
        "units_for_bound": for_bound,
        "task_floor": floor,
        "subsamples": each,
        "units": each * entered,
        "mde": mde_at(sd, each * entered, p.alpha, POWER, p.sides),
        "per_task_after_bh": per_task_after_bh(p.alpha, p.sides, each, entered),
    }


def leak_at(cfg: GridConfig, strength: int, leak: np.ndarray, units: int, absorbed=None) -> Leak:
    """The leak's power at K, one-sided (a leak is asked whether it raised the score), from the lower
    bound of its pilot mean."""
    from scipy import stats

    sd = float(np.std(leak, ddof=1)) if len(leak) > 1 else float("nan")
    mean = float(np.mean(leak))
    if not math.isfinite(sd) or sd == 0:
        return Leak(strength, len(leak), mean, sd, 0.0, float("nan"), 0.0, absorbed)
    low = mean - float(stats.t.ppf(0.95, len(leak) - 1)) * sd / math.sqrt(len(leak))
    power = power_at(low, sd, units, cfg.plan.alpha, "one")
    return Leak(
        strength, len(leak), mean, sd, power, low, power_at(mean, sd, units, cfg.plan.alpha, "one"), absorbed
    )
