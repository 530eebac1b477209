"""Convergence diagnostics of a fit: the largest rank-normalised split R-hat over every parameter,
beta's bulk and tail ESS, and the divergences."""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri
from scipy.stats import rankdata


def diagnostics(idata) -> dict[str, float]:
    """Max R-hat over every parameter (not the sampler's unconstrained internals, named ..._zerosum__
    and the like), beta's R-hat and ESS, and the divergences."""
    import arviz as az

    post = idata.posterior
    per_variable = {v: rank_rhat(post[v].to_numpy()) for v in model_variables(idata)}
    ess = az.ess(idata, var_names=["beta"], method="bulk")
    tail = az.ess(idata, var_names=["beta"], method="tail")
    return {
        "rhat_max": float(max(np.nanmax(r, initial=-np.inf) for r in per_variable.values())),
        "beta_rhat": float(per_variable["beta"]) if "beta" in per_variable else float("nan"),
        "beta_ess_bulk": float(ess["beta"]),
        "beta_ess_tail": float(tail["beta"]),
        "divergences": divergences(idata),
    }


def divergences(idata) -> int:
    return int(idata.sample_stats["diverging"].sum())


def model_variables(idata) -> list[str]:
    return [v for v in idata.posterior.data_vars if not v.endswith("__")]


def rank_rhat(draws: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat (Vehtari et al. 2021; arviz's `rhat`, method "rank"), the larger of
    the bulk and the folded one, of every scalar of a (chain, draw, ...) array at once: arviz loops over
    the scalars in Python, 4.7 s for the 2,558 of one study fit. NaN where a scalar is constant or
    not finite, or with under 2 chains or 4 draws, as arviz's."""
    chains, n = draws.shape[:2]
    x = draws.reshape(chains, n, -1).astype(float)
    if chains < 2 or n < 4:
        return np.full(draws.shape[2:], np.nan)
    half = n // 2
    split = np.concatenate([x[:, :half], x[:, n - half :]], axis=0)  # 2 x chains chains of half draws
    folded = np.abs(split - np.median(split, axis=(0, 1)))
    with np.errstate(invalid="ignore", divide="ignore"):  # a constant scalar: 0 / 0
        out = np.maximum(_rhat(_z_scale(split)), _rhat(_z_scale(folded)))
    out[~np.isfinite(x).all(axis=(0, 1))] = np.nan
    return out.reshape(draws.shape[2:])


def _z_scale(x: np.ndarray) -> np.ndarray:
    """Each scalar's draws replaced by the normal quantiles of their pooled ranks (Blom's 3/8)."""
    size = x.shape[0] * x.shape[1]
    ranks = rankdata(x.reshape(size, -1), axis=0).reshape(x.shape)
    return ndtri((ranks - 0.375) / (size + 0.25))


def _rhat(x: np.ndarray) -> np.ndarray:
    n = x.shape[1]
    between = n * np.var(x.mean(axis=1), axis=0, ddof=1)
    within = np.var(x, axis=1, ddof=1).mean(axis=0)
    return np.sqrt((between / within + n - 1) / n)
