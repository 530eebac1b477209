"""The error rates every test of the project is read at, and the formulas built on them: one source for
the grid's bias tests (harness.stats.summary.summary), the exposure test and the detectors' calibration
(contamination)."""

from __future__ import annotations

import math

ALPHA, POWER = 0.05, 0.80  # the one-sided level of every test, and the power its detectable effect is read at
RESAMPLES = 10_000  # permutation and bootstrap resamples
TARGET = 0.05  # the bias a study means to see (5 accuracy points): "powered" is read against it


def units_for(detectable_now: float, units: int, target: float = TARGET) -> int:
    """About how many units bring a detectable effect of `detectable_now`, read over `units`, down to
    `target`: it falls as one over the square root of the units (the t quantiles shrink too, so this errs
    high)."""
    return math.ceil(units * (detectable_now / target) ** 2)


def detectable(spread: float, df: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true effect a one-sided test at `alpha` finds with probability `power`, for an
    estimate of standard error `spread` on `df` degrees of freedom: (t_{1-alpha} + t_{power}) * spread
    (the normal approximation with t quantiles)."""
    from scipy import stats  # here, not at the top: the CLI reads this module's constants at start

    if not math.isfinite(spread) or df < 1:
        return float("inf")
    return float((stats.t.ppf(1 - alpha, df) + stats.t.ppf(power, df)) * spread)


def wilson(flagged: int, total: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a rate of `flagged` out of `total` (nan, nan where total is 0)."""
    if total == 0:
        return float("nan"), float("nan")
    from scipy import stats

    ci = stats.binomtest(flagged, total).proportion_ci(confidence, method="wilson")
    return float(ci.low), float(ci.high)


def clustered_wilson(flags, clusters, confidence: float = 0.95) -> tuple[float, float]:
    """A Wilson interval for a flag rate whose models come in clusters (the models of one unit share its
    documents, so their flags are not independent): Wilson's at the effective size n / deff, the design
    effect deff the ratio estimator's between-cluster variance over the binomial one (at least 1; 1 where
    it cannot be read: one cluster, or a rate of 0 or 1). Written by hand: scipy's Wilson takes whole
    counts only, and the effective size is not one."""
    from scipy import stats

    sums: dict = {}
    for flag, cluster in zip(flags, clusters, strict=True):
        total, count = sums.get(cluster, (0.0, 0))
        sums[cluster] = (total + float(flag), count + 1)
    n = sum(count for _, count in sums.values())
    if n == 0:
        return float("nan"), float("nan")
    p, k, deff = sum(total for total, _ in sums.values()) / n, len(sums), 1.0
    if k > 1 and 0 < p < 1:
        between = k / (k - 1) * sum((total - p * count) ** 2 for total, count in sums.values()) / n**2
        deff = max(1.0, between / (p * (1 - p) / n))
    m, z = n / deff, float(stats.norm.ppf(0.5 + confidence / 2))
    centre = (p + z**2 / (2 * m)) / (1 + z**2 / m)
    half = z * math.sqrt(p * (1 - p) / m + z**2 / (4 * m**2)) / (1 + z**2 / m)
    return max(centre - half, 0.0), min(centre + half, 1.0)


def level(alpha: float, sides: str) -> float:
    """The level each tail of a test is read at: alpha, split over two sides."""
    return alpha / 2 if sides == "two" else alpha


def mde_at(sd: float, units: int, alpha: float = ALPHA, power: float = POWER, sides: str = "two") -> float:
    """The smallest mean a paired test over `units` of spread `sd` sees with probability `power`:
    (t_{1-a, K-1} + t_{power, K-1}) * sd / sqrt(K), a the level of a tail."""
    return detectable(sd / math.sqrt(units), units - 1, level(alpha, sides), power)


def units_for_bound(
    sd: float,
    bound: float,
    alpha: float = ALPHA,
    power: float = POWER,
    sides: str = "two",
    most: int = 100_000,
) -> int:
    """The fewest units (at least 2) whose detectable mean is at most `bound`; `most` where none is."""
    units = 2
    while units < most and mde_at(sd, units, alpha, power, sides) > bound:
        units += 1
    return units


def power_at(mean: float, sd: float, units: int, alpha: float = ALPHA, sides: str = "two") -> float:
    """The probability a paired t-test over `units` of spread `sd` rejects where the true mean is `mean`
    (the noncentral t; a positive mean, the side a planted leak moves, for a one-sided test)."""
    from scipy import stats

    if units < 2:
        return 0.0
    if sd == 0:
        return 1.0 if mean != 0 else 0.0
    df, shift = units - 1, mean * math.sqrt(units) / sd
    crit = stats.t.ppf(1 - level(alpha, sides), df)
    upper = float(stats.nct.sf(crit, df, shift))
    return upper + (float(stats.nct.cdf(-crit, df, shift)) if sides == "two" else 0.0)
