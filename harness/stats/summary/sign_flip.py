"""The paired sign-flip test of a mean difference, and the interval that inverts it.

Under the null of no shift, each unit's difference d_i is as likely to carry either sign. The test
compares the observed sum with the sums of every sign vector s: sum_i s_i (d_i - shift). With K units
there are 2^K vectors. Up to EXACT_UP_TO units they are all counted, by meet in the middle: the sums
of each half are enumerated (2^(K/2) each), and the pairs whose total is as extreme are counted by
sorting one half and searching it. Above that, RESAMPLES vectors are drawn once per (K, seed), and the
count adds the observed vector (Phipson and Smyth 2010). Written here because scipy's
permutation_test enumerates only up to its n_resamples and gives no interval.

Convention: a sign vector whose statistic ties the observed one (within a relative 1e-9) counts as
at least as extreme. So at a shift where a tie appears, the p-value includes it, and the interval
holds its edges (it is closed). Two-sided means |sum| at least the observed |sum|; the sign-flip null
is symmetric, so this equals twice the one-sided p-value wherever the observed sum is not 0.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from harness.core.design.power import RESAMPLES

EXACT_UP_TO = 22  # 2^22 vectors: two halves of 2^11 sums each
TIE = 1e-9  # relative: sums this close to the observed one are ties
RESOLUTION = 1e-10  # an interval's edges are found to this (in the differences' unit)


def half_sums(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every sign vector's sum of +-x, and its sum of signs, over one half of the units (2^len(x) each)."""
    sums, signs = np.zeros(1), np.zeros(1)
    for value in x:
        sums = np.concatenate([sums + value, sums - value])
        signs = np.concatenate([signs + 1, signs - 1])
    return sums, signs


@lru_cache(maxsize=8)
def drawn_signs(k: int, seed: int, resamples: int) -> tuple[np.ndarray, np.ndarray]:
    """`resamples` random sign vectors of k units (+-1 as int8), and each one's sum of signs; read-only,
    the same for every call with these arguments."""
    signs = 1 - 2 * np.random.default_rng(seed).integers(0, 2, size=(resamples, k), dtype=np.int8)
    counts = signs.sum(axis=1, dtype=np.int64).astype(float)
    signs.flags.writeable = counts.flags.writeable = False
    return signs, counts


def signed_sums(signs: np.ndarray, d: np.ndarray, rows: int = 2048) -> np.ndarray:
    """signs @ d in float64, a block of rows at a time (the int8 signs are never all widened at once)."""
    return np.concatenate([signs[i : i + rows].astype(float) @ d for i in range(0, len(signs), rows)])


class SignFlip:
    """The test of one set of paired differences: its p-value at any shift, and its interval."""

    def __init__(self, differences, seed: int = 0, resamples: int = RESAMPLES) -> None:
        d = np.asarray(differences, float)
        self.d, self.k, self.total = d, len(d), float(d.sum())
        self.exact = self.k <= EXACT_UP_TO
        self.scale = float(np.abs(d).sum())
        if self.exact:
            half = self.k // 2
            self.left, self.right = half_sums(d[:half]), half_sums(d[half:])
            self.vectors = 2**self.k
        else:
            signs, self.signs = drawn_signs(self.k, seed, resamples)
            self.sums = signed_sums(signs, d)
            self.vectors = resamples

    def extreme(self, shift: float, two_sided: bool) -> int:
        """How many sign vectors give a statistic at least as extreme as the observed one at `shift`."""
        observed = self.total - shift * self.k
        tie = TIE * (self.scale + abs(shift) * self.k + 1e-300)
        if two_sided:
            threshold = abs(observed) - tie
            if threshold <= 0:
                return self.vectors  # the observed sum is 0: every vector is as extreme
        else:
            threshold = observed - tie
        if not self.exact:
            values = self.sums - shift * self.signs
            return int(np.sum((np.abs(values) if two_sided else values) >= threshold))
        (ls, lc), (rs, rc) = self.left, self.right
        left, right = ls - shift * lc, np.sort(rs - shift * rc)
        count = len(right) - np.searchsorted(right, threshold - left, side="left")
        if two_sided:  # threshold > 0 here, so the two tails never hold the same pair
            count = count + np.searchsorted(right, -threshold - left, side="right")
        return int(count.sum())

    def pvalue(self, shift: float = 0.0, alternative: str = "two-sided") -> float:
        """The p-value of the mean difference being `shift`: two-sided, or 'greater' (H1: above it)."""
        if alternative not in ("two-sided", "greater"):
            raise ValueError(f"alternative must be 'two-sided' or 'greater', got {alternative!r}")
        count = self.extreme(shift, alternative == "two-sided")
        added = 0 if self.exact else 1
        return (count + added) / (self.vectors + added)

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Every shift the two-sided test does not reject at 1 - confidence, as [low, high] (closed);
        (-inf, inf) where no test of these units can reject (its smallest p-value, 2^(1-K), is above
        the level); NaN below 2 units."""
        level = 1 - confidence
        if self.k < 2:
            return float("nan"), float("nan")
        if 0.5 ** (self.k - 1) > level:
            return -float("inf"), float("inf")
        mean = self.total / self.k
        span = float(np.ptp(self.d)) + 1e-9

        def edge(outside: float) -> float:  # between the mean (accepted) and a shift the test rejects
            inside = mean
            while abs(outside - inside) > RESOLUTION:
                middle = (inside + outside) / 2
                if self.pvalue(middle) > level:
                    inside = middle
                else:
                    outside = middle
            return inside

        return edge(float(self.d.min()) - span), edge(float(self.d.max()) + span)


@lru_cache(maxsize=4096)
def _interval(data: bytes, seed: int, confidence: float) -> tuple[float, float]:
    return SignFlip(np.frombuffer(data), seed).interval(confidence)


def interval(differences, seed: int = 0, confidence: float = 0.95) -> tuple[float, float]:
    """SignFlip(differences, seed).interval(confidence), computed once for the same arguments (the
    summary reads its low and its high as two statistics)."""
    return _interval(np.ascontiguousarray(differences, float).tobytes(), seed, confidence)
