"""The summary's statistics, one table: each names its JSON key, its column, how it is computed from a
task's paired accuracies and which effects carry it. The per-task rows, the pooled rows, the JSON and
the report all read this table, so a new statistic is one `register(Statistic(...))`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from harness.core import conditions
from harness.core.errors import UserError
from harness.core.plugins import called, load_entry_points, real, where
from harness.core.power import ALPHA, POWER, RESAMPLES, detectable

KINDS = ("points", "p", "mde")  # how a column is shown: signed points, a p-value, unsigned points


def paired_pvalue(treatment: np.ndarray, control: np.ndarray, seed: int = 0) -> float:
    """Paired permutation test of H1: E[treatment - control] > 0 (signs of the differences are permuted)."""
    if len(treatment) < 2 or np.all(treatment == control):
        return 1.0
    res = stats.permutation_test(
        (treatment, control),
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
    with probability `power`, from their spread and count; inf where they have no spread, which says
    nothing of the power."""
    k = len(differences)
    if k < 2 or 0.5**k > alpha:  # the sign-flip test's smallest p-value is 2^-K: it can never reject
        return float("inf")
    if np.ptp(differences) == 0:  # no spread to read power from (a method that moved nothing): none claimed
        return float("inf")
    return detectable(float(np.std(differences, ddof=1) / np.sqrt(k)), k - 1, alpha, power)


def bh(values: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjustment of the finite p-values (NaN stays NaN)."""
    out = np.full(len(values), np.nan)
    finite = np.isfinite(values)
    if finite.any():
        out[finite] = stats.false_discovery_control(values[finite], method="bh")
    return out


@dataclass(frozen=True)
class Statistic:
    """`key` and `header` may hold `{e}`, the effect's name. `compute(treatment, control, seed)` reads one
    task's (or, where `pooled`, every task's) paired accuracies; `across(values)` instead adjusts the
    per-task values of the statistic keyed `of` (a multiple-testing correction). `empty` is the value
    where no unit measures the effect."""

    key: str
    header: str
    kind: str
    effects: Callable[[str], bool]
    compute: Callable[[np.ndarray, np.ndarray, int], float] | None = None
    across: Callable[[np.ndarray], np.ndarray] | None = None
    of: str = ""
    pooled: Callable[[str], bool] = lambda e: False
    empty: float = float("nan")

    def name(self, effect: str) -> str:
        return self.key.format(e=effect)

    def value(self, effect: str, treatment: np.ndarray, control: np.ndarray, seed: int) -> float:
        """`compute`'s value; a plug-in's failure, or a value that is not a finite number, named by its
        file (harness.core.plugins.real)."""
        value = called("statistic", self.name(effect), self.compute, treatment, control, seed)
        return real("statistic", self.name(effect), self.compute, value)

    def adjusted(self, effect: str, values: np.ndarray) -> np.ndarray:
        """`across`'s values, one a task; a plug-in's failure, or anything else, named by its file."""
        out = called("statistic", self.name(effect), self.across, values)
        array = np.asarray(out) if not isinstance(out, (str, bytes)) else np.asarray([])
        if array.shape != values.shape or not np.issubdtype(array.dtype, np.number):
            raise UserError(
                f"statistic {self.name(effect)!r} ({where(self.across)}) returned {out!r} for {len(values)} "
                "tasks; it must return one number a task: fix that file"
            )
        return array.astype(float)


STATISTICS: list[Statistic] = []
ENTRY_POINTS = "tapt_bench.statistics"  # installed modules that register statistics as they load


def load_installed() -> None:
    """The installed statistic plug-ins (entry points of `tapt_bench.statistics`), imported."""
    load_entry_points(ENTRY_POINTS)


def register(statistic: Statistic) -> Statistic:
    """Add a statistic to the summary (refused where its key is taken or its kind unknown)."""
    if statistic.kind not in KINDS:
        raise ValueError(f"statistic {statistic.key!r}: kind must be one of {KINDS}, got {statistic.kind!r}")
    if any(s.key == statistic.key for s in STATISTICS):
        raise ValueError(f"a statistic keyed {statistic.key!r} is registered already")
    if (statistic.compute is None) == (statistic.across is None):
        raise ValueError(f"statistic {statistic.key!r}: give it either compute or across")
    STATISTICS.append(statistic)
    return statistic


def tested(e: str) -> bool:
    return e in conditions.TESTED


def primary(e: str) -> bool:
    return e == conditions.PRIMARY


register(
    Statistic(
        "{e}_mean",
        "{e}",
        "points",
        lambda e: True,
        lambda t, c, s: float(np.mean(t - c)),
        pooled=lambda e: True,
    )
)
register(Statistic("{e}_p_value", "p", "p", tested, paired_pvalue, pooled=tested))
register(Statistic("{e}_p_adjusted", "p_BH", "p", tested, across=bh, of="{e}_p_value"))
register(
    Statistic(
        "detectable_{e}",
        "MDE",
        "mde",
        primary,
        lambda t, c, s: detectable_effect(t - c),
        pooled=primary,
        empty=float("inf"),
    )
)
