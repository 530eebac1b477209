"""The summary's statistics, one table: each names its JSON key, its column, how it is computed from a
task's paired accuracies and which effects carry it. The per-task rows, the pooled rows, the JSON and
the report all read this table, so a new statistic is one `register(Statistic(...))`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from harness.core.design import conditions
from harness.core.design.power import ALPHA, POWER, detectable
from harness.core.plumbing.errors import UserError
from harness.core.plumbing.plugins import PluginError, Registry, called, real, where
from harness.stats.summary import sign_flip

KINDS = ("points", "p", "mde")  # how a column is shown: signed points, a p-value, unsigned points


def paired_pvalue(
    treatment: np.ndarray, control: np.ndarray, seed: int = 0, alternative: str = "two-sided"
) -> float:
    """The paired sign-flip test of E[treatment - control] = 0 (harness.stats.summary.sign_flip: exact up to
    22 units): two-sided by default; `alternative="greater"` is the study's one-sided test (H1: above 0)."""
    if len(treatment) < 2 or np.all(treatment == control):
        return 1.0
    return sign_flip.SignFlip(np.asarray(treatment, float) - control, seed).pvalue(0.0, alternative)


def flip_interval(differences: np.ndarray, seed: int = 0, confidence: float = 0.95) -> tuple[float, float]:
    """The two-sided interval of the mean paired difference that inverts the sign-flip test
    (harness.stats.summary.sign_flip.SignFlip.interval), computed once for the same differences."""
    return sign_flip.interval(differences, seed, confidence)


def interval_low(treatment: np.ndarray, control: np.ndarray, seed: int) -> float:
    return flip_interval(np.asarray(treatment, float) - control, seed)[0]


def interval_high(treatment: np.ndarray, control: np.ndarray, seed: int) -> float:
    return flip_interval(np.asarray(treatment, float) - control, seed)[1]


def detectable_effect(differences: np.ndarray, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest mean shift of these paired differences that the two-sided test at `alpha` detects
    with probability `power`, from their spread and count; inf where they have no spread, which says
    nothing of the power."""
    k = len(differences)
    if k < 2 or 0.5 ** (k - 1) > alpha:  # the two-sided sign-flip test's smallest p-value: 2^(1-K)
        return float("inf")
    if np.ptp(differences) == 0:  # no spread to read power from (a method that moved nothing): none claimed
        return float("inf")
    return detectable(float(np.std(differences, ddof=1) / np.sqrt(k)), k - 1, alpha / 2, power)


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
    sided: bool = False  # compute takes the test's alternative ('two-sided', 'greater') as a 4th argument

    def name(self, effect: str) -> str:
        return self.key.format(e=effect)

    def value(
        self,
        effect: str,
        treatment: np.ndarray,
        control: np.ndarray,
        seed: int,
        alternative: str = "two-sided",
    ) -> float:
        """`compute`'s value (with the test's `alternative` where it is sided); a plug-in's failure, or a
        value that is not a finite number, named by its file (harness.core.plumbing.plugins.real)."""
        sided = (alternative,) if self.sided else ()
        value = called("statistic", self.name(effect), self.compute, treatment, control, seed, *sided)
        return self.in_range(effect, real("statistic", self.name(effect), self.compute, value), self.compute)

    def in_range(self, effect: str, value: float, made_by) -> float:
        """A p-value in [0, 1]; anything else named by the file that made it."""
        if self.kind == "p" and np.isfinite(value) and not 0 <= value <= 1:
            raise UserError(
                f"statistic {self.name(effect)!r} ({where(made_by)}) returned the p-value {value!r}, and a "
                "p-value lies in [0, 1]: fix that file"
            )
        return value

    def adjusted(self, effect: str, values: np.ndarray) -> np.ndarray:
        """`across`'s values, one a task; a plug-in's failure, or anything else, named by its file."""
        out = called("statistic", self.name(effect), self.across, values)
        array = np.asarray(out) if not isinstance(out, (str, bytes)) else np.asarray([])
        if array.shape != values.shape or not np.issubdtype(array.dtype, np.number):
            raise UserError(
                f"statistic {self.name(effect)!r} ({where(self.across)}) returned {out!r} for {len(values)} "
                "tasks; it must return one number a task: fix that file"
            )
        for value in array.astype(float):
            self.in_range(effect, value, self.across)
        return array.astype(float)


def load_installed() -> None:
    """The installed statistic plug-ins (entry points of `tapt_bench.statistics`), loaded."""
    len(STATISTICS)  # reading the registry loads them


def checked(statistic: Statistic) -> None:
    """A statistic's own fields, before it is added: its kind, one of compute or across, keys that format,
    effects it chooses among the summary's."""
    if isinstance(statistic, Statistic) and statistic.kind not in KINDS:
        raise PluginError(f"statistic {statistic.key!r}: kind must be one of {KINDS}, got {statistic.kind!r}")
    if isinstance(statistic, Statistic) and (statistic.compute is None) == (statistic.across is None):
        raise PluginError(f"statistic {statistic.key!r}: give it either compute or across")
    if isinstance(statistic, Statistic):
        for field in ("key", "header", "of"):
            text = getattr(statistic, field)
            try:
                str(text).format(e=conditions.PRIMARY)
            except (KeyError, IndexError, ValueError) as err:
                made_by = where(statistic.compute or statistic.across)
                raise PluginError(
                    f"statistic {statistic.key!r} ({made_by}): its {field} {text!r} holds "
                    f"{held(err)}; the one name it may hold is {{e}}, the effect's (a literal brace is "
                    "written {{ or }})"
                ) from None
    if isinstance(statistic, Statistic):
        chosen = [e for e in conditions.EFFECTS if called("statistic", statistic.key, statistic.effects, e)]
        if not chosen:
            raise PluginError(
                f"statistic {statistic.key!r} ({where(statistic.compute or statistic.across)}): its effects "
                f"choose none of the effects a summary holds ({', '.join(conditions.EFFECTS)}), so it would "
                "never show: choose among those names"
            )


# the summary's statistics by key, in the table's order: the built-ins below, then the plug-ins
STATISTICS: Registry[Statistic] = Registry("statistic", Statistic, key=lambda s: s.key, validate=checked)


def register(statistic: Statistic) -> Statistic:
    """Add a statistic to the summary (refused where its key is taken or its fields do not hold)."""
    return STATISTICS.register(statistic)


def held(err: Exception) -> str:
    """What a key's str.format failed on: the name in braces, or a brace without its pair."""
    return f"{{{err.args[0]}}}" if isinstance(err, KeyError) else "a brace without its pair"


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
register(Statistic("{e}_low", "low", "points", lambda e: True, interval_low, pooled=lambda e: True))
register(Statistic("{e}_high", "high", "points", lambda e: True, interval_high, pooled=lambda e: True))
register(Statistic("{e}_p_value", "p", "p", tested, paired_pvalue, pooled=tested, sided=True))
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
BUILT_IN = tuple(
    STATISTICS.registered()
)  # the keys above: a plug-in's statistic is any other (the pooled line adds it)


def plug_in_values(config: dict, effect: str) -> list[str]:
    """`header value` of each plug-in statistic pooled for `effect` that `config` holds, as the pooled
    line shows it beside the built-ins (points, a p-value, or an MDE)."""
    shown = []
    for st in STATISTICS.values():
        name = st.name(effect)
        if st.key in BUILT_IN or not st.pooled(effect) or name not in config:
            continue
        value = config[name]
        text = (
            f"{value:.4f}"
            if st.kind == "p"
            else f"{100 * value:+.2f} pts"
            if st.kind == "points"
            else f"{100 * value:.2f} pts"
        )
        shown.append(f"{st.header.format(e=effect)} {text}")
    return shown
