"""The study's hierarchical model of paired correct counts (its §6, Appendix E), written as the math.

For LM type i, task j, subsample k and control/treatment l in {0, 1}:

    Y_ijkl ~ Binomial(n, lambda_ijkl),   Y = round(n * accuracy)
    logit(lambda_ijkl) = mu + alpha z_i + U_j + V_jk + W_jl + beta x_ijkl
    mu ~ N(0, 1), alpha ~ N(0, 5), beta ~ N(0, 1)
    U_j ~ N(0, sigma_U), V_jk ~ N(0, sigma_V), W_jl ~ N(0, sigma_W)
    sigma_U, sigma_V ~ HalfNormal(1), sigma_W ~ HalfNormal(3.5355)       (PRIOR below)

`study_model` is this model verbatim. `fast_model` is the same model reparametrised: the same
distribution of every logit(lambda) and the same posterior of beta, without the ridges that slow
NUTS down (mu against the mean of U, U_j against the mean of V_j., beta against the mean
treatment contrast of W). It splits each Gaussian group into its mean and its zero-sum deviations
(independent, for iid normals), folds the means into one intercept c and one slope b (logit =
c + C_j + Vd_jk + (x - 1/2)(b + D_j) + alpha z_i), and draws beta from its exact Gaussian
conditional given (c, b), the only way the data reach it. See `fast_model` for the algebra.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.core.design.conditions import EFFECTS  # (control l=0, treatment l=1) of each effect
from harness.core.plumbing.errors import UserError

GRID = ("lm_type", "task", "subsample", "treatment")  # the (i, j, k, l) of every count

# the study's priors: the scale of each normal prior (mu, alpha, beta) and of each half-normal scale prior
PRIOR = {"mu": 1.0, "alpha": 5.0, "beta": 1.0, "sigma_U": 1.0, "sigma_V": 1.0, "sigma_W": 3.5355}


@dataclass
class CellData:
    """The paired correct counts of one (m, n) cell for one effect, in long form, with its coords."""

    m: int
    n: int
    effect: str
    obs: pd.DataFrame  # lm_type, task, subsample, treated (0/1), y, plus integer codes i, j, k
    coords: dict[str, list]

    @property
    def shape(self) -> str:
        c = self.coords
        return (
            f"{len(c['lm_type'])} LM type(s) x {len(c['task'])} tasks x {len(c['subsample'])} subsamples "
            f"x 2 = {len(self.obs)} observations"
        )


def cell_data(df: pd.DataFrame, effect: str, source: str = "results") -> CellData:
    """Counts round(n * accuracy) of one cell's control and treatment columns (rows of `collect`).

    Checks what the model needs: one n, both conditions, at least two tasks, and the same subsamples
    for every (LM type, task), since V_jk is shared by the LM types that saw subsample k."""
    if effect not in EFFECTS:
        raise UserError(f"effect must be one of {sorted(EFFECTS)}, got {effect!r}")
    control, treatment = EFFECTS[effect]
    missing = [c for c in (control, treatment) if c not in df.columns or df[c].isna().all()]
    if missing:
        raise UserError(
            f"{source}: no {missing} accuracies; the {effect} effect compares {control} with {treatment}"
        )
    cells = df[["m", "n"]].drop_duplicates()
    if len(cells) != 1:
        raise UserError(
            f"{source}: one fit takes one (m, n) cell, got {len(cells)}: "
            f"{sorted(map(tuple, cells.to_numpy().tolist()))}; pick one with --m and --n"
        )
    tasks = sorted(df["task"].unique())
    if len(tasks) < 2:
        raise UserError(
            f"{source}: the hierarchical model pools tasks and needs at least two, got {tasks}; "
            "for a single task use `tapt-bench summarize` (its permutation test)"
        )
    per = df.groupby(["model", "task"])["subsample"].apply(lambda s: tuple(sorted(s)))
    if per.nunique() != 1:
        counts = df.groupby(["model", "task"]).size()
        raise UserError(
            f"{source}: the (LM type, task) pairs have different subsamples (rows per pair: "
            f"{counts.min()} to {counts.max()}, e.g. {counts.idxmin()} has {counts.min()}); V_jk needs "
            "the same subsamples everywhere: finish the grid's missing units, or fit the first K of each "
            "(`--subsamples K`) or some models (`--models`)"
        )
    m, n = (int(x) for x in cells.iloc[0])
    coords = {
        "lm_type": sorted(df["model"].unique()),
        "task": tasks,
        "subsample": list(per.iloc[0]),
        "treatment": [control, treatment],
    }
    long = []
    for treated, col in enumerate((control, treatment)):  # l = 0, 1
        part = df[["model", "task", "subsample"]].rename(columns={"model": "lm_type"})
        long.append(part.assign(treated=treated, y=np.round(df[col].to_numpy() * n).astype(int)))
    obs = pd.concat(long, ignore_index=True)
    for code, name in (("i", "lm_type"), ("j", "task"), ("k", "subsample")):
        obs[code] = pd.Categorical(obs[name], categories=coords[name]).codes
    return CellData(m, n, effect, obs, coords)


def data_of(d: CellData) -> dict:
    """The model's data: the (i, j, k) codes, treatment x and count y of every observation, and n; and
    the same counts on the (LM type, task, subsample, treatment) grid with their trials (n, or 0 where
    an LM type lacks a task). A compiled model is refitted to another cell of the same coords by
    swapping these in."""
    o = d.obs
    where = (o["i"].to_numpy(), o["j"].to_numpy(), o["k"].to_numpy(), o["treated"].to_numpy())
    counts = np.zeros(tuple(len(d.coords[dim]) for dim in GRID), dtype=np.int64)
    trials = np.zeros_like(counts)
    counts[where], trials[where] = o["y"].to_numpy(), d.n
    return {
        "i": where[0],
        "j": where[1],
        "k": where[2],
        "x": where[3],
        "y": o["y"].to_numpy(),
        "n": np.asarray(d.n, dtype=np.int64),
        "counts": counts,
        "trials": trials,
    }


def observe(d: CellData, eta, likelihood: str) -> None:
    """The counts given logit(lambda) `eta` on the grid (dims GRID).

    binomial: Y_ijkl ~ Binomial(n, lambda_ijkl), one observed variable per observation (the
    predictive draws and the checks read it). kernel: the same log-likelihood less its constant
    sum log C(n, Y), sum(Y eta - n log(1 + e^eta)), as one potential: the same posterior for NUTS at
    a third of the gradient's cost (no log-gamma of the data at every step, no gather per observation)."""
    import pymc as pm
    import pytensor.tensor as pt

    data = data_of(d)
    if likelihood == "kernel":
        counts = pm.Data("counts", data["counts"], dims=GRID)
        trials = pm.Data("trials", data["trials"], dims=GRID)
        pm.Potential("Y_kernel", (counts * eta - trials * pt.softplus(eta)).sum())
        return
    i, j, k, x, y = (pm.Data(name, data[name], dims="obs") for name in "ijkxy")
    pm.Binomial("Y", n=pm.Data("n", data["n"]), logit_p=eta[i, j, k, x], observed=y, dims="obs")


def _lm_type_term(d: CellData):
    """alpha z_i on the grid: one alpha per LM type after the first (none with a single type)."""
    import pymc as pm
    import pytensor.tensor as pt

    if len(d.coords["lm_type"]) == 1:
        return 0.0
    alpha = pm.Normal("alpha", 0.0, PRIOR["alpha"], dims="lm_contrast")
    return pt.concatenate([pt.zeros(1), alpha])[:, None, None, None]


def coords_of(d: CellData) -> dict:
    return {**d.coords, "lm_contrast": d.coords["lm_type"][1:], "obs": np.arange(len(d.obs))}


def scales():
    """sigma_U, sigma_V, sigma_W with their half-normal priors."""
    import pymc as pm

    return tuple(pm.HalfNormal(name, PRIOR[name]) for name in ("sigma_U", "sigma_V", "sigma_W"))


def study_model(d: CellData, likelihood: str = "binomial"):
    """The study's model as written (centered); every term on the (i, j, k, l) grid."""
    import pymc as pm
    import pytensor.tensor as pt

    with pm.Model(coords=coords_of(d)) as model:
        x = pt.as_tensor([0.0, 1.0])  # x_ijkl = l
        mu = pm.Normal("mu", 0.0, PRIOR["mu"])
        sigma_U, sigma_V, sigma_W = scales()
        U = pm.Normal("U", 0.0, sigma_U, dims="task")
        V = pm.Normal("V", 0.0, sigma_V, dims=("task", "subsample"))
        W = pm.Normal("W", 0.0, sigma_W, dims=("task", "treatment"))
        beta = pm.Normal("beta", 0.0, PRIOR["beta"])
        eta = mu + _lm_type_term(d) + U[None, :, None, None] + V[None, :, :, None] + W[None, :, None, :]
        eta = eta + beta * x
        observe(d, eta, likelihood)
    return model


def slopes_are_informed(d: CellData) -> bool:
    """Whether the data pin each task's treatment contrast down more tightly than the contrasts
    differ across tasks: the between-task variance of the observed per-task logit contrasts, less
    their mean squared standard error (a moment estimate of 2 sigma_W^2), against that squared
    error. The usual rule for a group effect: centred when informed, non-centred when not (both
    sample the same model; the wrong one mixes slowly or diverges)."""
    o = d.obs.assign(p=(d.obs["y"] + 0.5) / (d.n + 1))
    o = o.assign(logit=np.log(o["p"] / (1 - o["p"])), var=1 / (d.n * o["p"] * (1 - o["p"])))
    unit = o.pivot_table(index=["task", "lm_type", "subsample"], columns="treated", values=["logit", "var"])
    contrast = (unit[("logit", 1)] - unit[("logit", 0)]).groupby(level="task")
    noise = (unit[("var", 1)] + unit[("var", 0)]).groupby(level="task")
    squared_error = (noise.mean() / noise.size()).mean()
    return bool(contrast.mean().var(ddof=1) - squared_error > squared_error)


def fast_model(d: CellData, centered_slopes: bool | None = None, likelihood: str = "binomial"):
    """The same model, reparametrised (exact; no approximation).

    With J tasks and K subsamples, let bars be means over tasks (and over subsamples for V):
      C_j  = (U_j - Ubar) + (Vbar_j - Vbarbar) + (Wbar_j - Wbarbar), Wbar_j = (W_j0 + W_j1)/2: zero-sum
             normal over tasks with sigma_C^2 = sigma_U^2 + sigma_V^2/K + sigma_W^2/2
      Vd_jk = V_jk - Vbar_j: zero-sum normal over each task's subsamples, sigma_V
      D_j  = (W_j1 - W_j0) - mean_j(W_j1 - W_j0): zero-sum normal over tasks, sqrt(2) sigma_W
      c    = mu + beta/2 + Ubar + Vbarbar + Wbarbar,  b = beta + mean_j(W_j1 - W_j0)
    so that logit = c + C_j + Vd_jk + (x - 1/2)(b + D_j) + alpha z_i, term for term the study's.
    Means and deviations of iid normals are independent, so (c, b) is bivariate normal given the
    sigmas, with var c = 1 + 1/4 + sigma_C^2/J, var b = 1 + 2 sigma_W^2/J, cov = 1/2 (both hold beta;
    the 1s are the prior variances of mu and beta),
    independent of the deviations. The data see beta only through (c, b): its posterior is the
    Gaussian conditional of beta given (c, b), sampled here as a variable of its own.
    """
    import pymc as pm
    import pytensor.tensor as pt

    J, K = len(d.coords["task"]), len(d.coords["subsample"])
    if centered_slopes is None:
        centered_slopes = slopes_are_informed(d)
    with pm.Model(coords=coords_of(d)) as model:
        x = pt.as_tensor([0.0, 1.0])  # x_ijkl = l
        sigma_U, sigma_V, sigma_W = scales()
        sigma_C = pt.sqrt(sigma_U**2 + sigma_V**2 / K + sigma_W**2 / 2)
        var_beta = PRIOR["beta"] ** 2
        var_c = PRIOR["mu"] ** 2 + var_beta / 4 + sigma_C**2 / J
        var_b = var_beta + 2 * sigma_W**2 / J
        cov_cb = var_beta / 2  # both hold beta: c with weight 1/2, b with weight 1
        b = pm.Normal("b", 0.0, pt.sqrt(var_b))  # (c, b) bivariate normal, drawn as b, then c given b
        c = pm.Normal("c", cov_cb / var_b * b, pt.sqrt(var_c - cov_cb**2 / var_b))
        C = pm.ZeroSumNormal("C", sigma=sigma_C, dims="task")
        if centered_slopes:
            D = pm.ZeroSumNormal("D", sigma=math.sqrt(2) * sigma_W, dims="task")
        else:  # non-centred: with sigma_W near 0 the centred form funnels
            D_raw = pm.ZeroSumNormal("D_raw", sigma=1.0, dims="task")
            D = pm.Deterministic("D", math.sqrt(2) * sigma_W * D_raw, dims="task")
        eta = c + _lm_type_term(d) + C[None, :, None, None] + (x - 0.5) * (b + D)[None, :, None, None]
        if K > 1:  # one subsample per task (a meta-analysis slice) leaves no within-task deviation
            Vd = pm.ZeroSumNormal("Vd", sigma=sigma_V, dims=("task", "subsample"), n_zerosum_axes=1)
            eta = eta + Vd[None, :, :, None]
        # beta | c, b: x = (mu, beta, R = Ubar + Vbarbar + Wbarbar, Dbar), independent a priori;
        # c = mu + beta/2 + R, b = beta + Dbar, so cov(beta, (c, b)) = var_beta (1/2, 1) =: k, cov((c, b)) = S
        det = var_c * var_b - cov_cb**2
        k_c, k_b = var_beta / 2, var_beta
        w_c, w_b = (k_c * var_b - k_b * cov_cb) / det, (k_b * var_c - k_c * cov_cb) / det  # k S^-1
        beta_mean = w_c * c + w_b * b
        beta_sd = pt.sqrt(var_beta - (w_c * k_c + w_b * k_b))
        beta_raw = pm.Normal("beta_raw", 0.0, 1.0)
        pm.Deterministic("beta", beta_mean + beta_sd * beta_raw)
        observe(d, eta, likelihood)
    return model


def model_of(
    d: CellData, parametrization: str, centered_slopes: bool | None = None, likelihood: str = "binomial"
):
    """The model of a cell in the chosen parametrization (`centered_slopes`: the fast model's choice)
    and form of the likelihood (see `observe`)."""
    if parametrization == "fast":
        return fast_model(d, centered_slopes, likelihood)
    return study_model(d, likelihood)
