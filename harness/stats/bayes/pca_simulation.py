"""A setting where pretraining on the test set's unlabeled features does bias the test score: PCA
as the "pretraining", linear regression as the supervised step (the study's early drafts, appendix H).

Per subsample: `features` Gaussian features whose covariance has a random orientation and the
singular-value profile exp(-(i / rank)^2) of sklearn's `make_low_rank_matrix` (tail strength 0),
so `rank` sets how many directions carry the variance: its effective rank. The target is a linear
function of the features in the population's top `components` directions (scaled to variance 1),
plus Normal(0, 1) noise. "Pretraining" fits a `components`-dimensional PCA on the unlabeled
features of `extra` or of `test`; the supervised step regresses the target on the projected
features of `train`; the score is R^2 on `test`. The bias is R^2 with the test-fitted PCA minus R^2
with the extra-fitted one. Written with batched numpy (no library fits thousands of small PCAs
and regressions in one call).

Two things move with the rank: a test-fitted PCA keeps more of the test points' own variance (and
so of their signal), and it also stretches the test scores along its components, which magnifies
the error of the coefficients fitted on train. Which one wins depends on m and n (`tapt-bench simulate
pca` measures it; docs/grid.md, "Where pretraining on test does bias a score").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.core.plumbing.errors import SettingsError
from harness.core.plumbing.settings import Settings, option


@dataclass(kw_only=True)
class PcaSettings(Settings):
    """The PCA simulation's design."""

    MINIMUM = {"subsamples": 2, "features": 2, "m": 3, "n": 3, "components": 1, "seed": 0}

    ranks: list[int] = option([1, 2, 3, 5, 8, 10, 15, 20], "effective ranks of the features")
    subsamples: int = option(2000, "subsamples per effective rank")
    features: int = option(20, "number of features")
    m: int = option(100, "labeled train size (the study's default cell, m = n = 100)")
    n: int = option(100, "size of the unlabeled extra set and of the labeled test set")
    components: int = option(3, "PCA components kept (and directions the target depends on)")
    seed: int = option(0, "seed")
    json: bool = option(False, "print machine-readable output")
    plot: str | None = option(None, "PNG file: the bias against effective rank with 95% intervals")

    def check(self) -> None:
        super().check()
        bad = [r for r in self.ranks if not 1 <= r <= self.features]
        if bad:
            problem = f"must each be between 1 and --features ({self.features}): got {bad}"
            raise SettingsError.of("ranks", problem)
        if self.components > self.features:
            problem = f"must be at most --features ({self.features}), got {self.components}"
            raise SettingsError.of("components", problem)


def r_squared(X: np.ndarray, y: np.ndarray, fit_on: slice, train: slice, test: slice, k: int) -> np.ndarray:
    """R^2 on `test` of a regression on `train` of the top-k PCA scores fitted on `fit_on`, per subsample."""
    pool = X[:, fit_on]
    center = pool.mean(axis=1, keepdims=True)
    basis = np.linalg.svd(pool - center, full_matrices=False)[2][:, :k].transpose(0, 2, 1)

    def design(rows: slice) -> np.ndarray:
        scores = (X[:, rows] - center) @ basis
        return np.concatenate([scores, np.ones(scores.shape[:2] + (1,))], axis=2)

    A = design(train)
    coef = np.linalg.solve(A.transpose(0, 2, 1) @ A, A.transpose(0, 2, 1) @ y[:, train, None])
    truth = y[:, test]
    residual = truth - (design(test) @ coef)[..., 0]
    return 1 - (residual**2).sum(1) / ((truth - truth.mean(1, keepdims=True)) ** 2).sum(1)


def one_rank(rank: int, s: PcaSettings, rng: np.random.Generator) -> dict:
    d, k = s.features, s.components
    train, extra, test = slice(0, s.m), slice(s.m, s.m + s.n), slice(s.m + s.n, s.m + 2 * s.n)
    profile = np.exp(-((np.arange(d) / rank) ** 2))
    rotation = np.linalg.qr(rng.normal(size=(s.subsamples, d, d)))[0]
    X = (rng.normal(size=(s.subsamples, s.m + 2 * s.n, d)) * profile) @ rotation.transpose(0, 2, 1)
    weights = rotation[:, :, :k] @ rng.normal(size=(s.subsamples, k, 1))
    signal = (X @ weights)[..., 0]
    y = signal / signal.std(axis=1, keepdims=True) + rng.normal(size=signal.shape)
    r2_extra = r_squared(X, y, extra, train, test, k)
    r2_test = r_squared(X, y, test, train, test, k)
    bias = r2_test - r2_extra
    se = bias.std(ddof=1) / np.sqrt(len(bias))
    return {
        "rank": rank,
        "r2_extra": float(r2_extra.mean()),
        "r2_test": float(r2_test.mean()),
        "bias": float(bias.mean()),
        "ci95": [float(bias.mean() - 1.96 * se), float(bias.mean() + 1.96 * se)],
    }


def simulate(s: PcaSettings) -> list[dict]:
    rng = np.random.default_rng(s.seed)
    return [one_rank(rank, s, rng) for rank in s.ranks]


def plot(rows: list[dict], s: PcaSettings, path: str) -> None:
    from harness.stats.bayes.plots import pyplot, save

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ranks = [r["rank"] for r in rows]
    ax.errorbar(
        ranks,
        [r["bias"] for r in rows],
        fmt="o-",
        yerr=[[r["bias"] - r["ci95"][0] for r in rows], [r["ci95"][1] - r["bias"] for r in rows]],
    )
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel(f"effective rank of the {s.features} features")
    ax.set_ylabel("R² (test-fitted PCA) - R² (extra-fitted)")
    ax.set_title(
        f"PCA pretraining on test features: bias (95% intervals, {s.subsamples} subsamples each)", fontsize=9
    )
    save(fig, Path(path))


def format_rows(rows: list[dict], s: PcaSettings) -> str:
    lines = [
        f"PCA simulation: {s.features} features, m={s.m}, n={s.n}, {s.components} components, "
        f"{s.subsamples} subsamples per rank",
        f"{'rank':>4} {'R2 extra-PCA':>12} {'R2 test-PCA':>11} {'bias':>8}  95% interval",
    ]
    for r in rows:
        lines.append(
            f"{r['rank']:4d} {r['r2_extra']:12.4f} {r['r2_test']:11.4f} {r['bias']:+8.4f}  "
            f"[{r['ci95'][0]:+.4f}, {r['ci95'][1]:+.4f}]"
        )
    return "\n".join(lines)
