"""Fits of the hierarchical model per (m, n) cell and effect: beta and the posterior predictive
accuracy differences (the study's eq. 11 and 12). A model is compiled once per layout (its coords)
and refitted with each cell's, effect's or replicate's data."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from harness.core.errors import SettingsError, UserError
from harness.core.settings import Settings, option, pick
from harness.stats.bayes import CellData, cell_data, data_of, model_of, slopes_are_informed


@dataclass(kw_only=True)
class FitSettings(Settings):
    """How each cell is fitted (the study: 4 chains x 1,000 draws after 500 tuning steps)."""

    MINIMUM = {
        "chains": 1,
        "draws": 10,
        "tune": 0,
        "seed": 0,
        "hdi_prob": 0.01,
        "target_accept": 0.5,
        "retry_target_accept": 0.0,
    }

    chains: int = option(4, "NUTS chains")
    draws: int = option(1000, "draws per chain kept")
    tune: int = option(500, "tuning steps per chain")
    seed: int = option(0, "seed of the sampler and of the posterior predictive draws")
    hdi_prob: float = option(0.89, "probability mass of the reported highest-density intervals")
    target_accept: float = option(0.8, "NUTS target acceptance (PyMC's and nutpie's default)")
    retry_target_accept: float = option(
        0.95,
        "a fit with divergences is refitted once, with the same seed, at this target acceptance when it "
        "is higher (0.8 diverged on small grids of few tasks; the README compares the levels); 0: never",
    )
    sampler: Literal["nutpie", "pymc"] = option("nutpie", "NUTS implementation (nutpie: compiled with numba)")
    likelihood: Literal["kernel", "binomial"] = option(
        "kernel",
        "what NUTS evaluates: kernel: the binomial log-likelihood less its constant, on the grid of "
        "counts (same posterior, a third of the cost); binomial: PyMC's Binomial per observation",
    )
    parametrization: Literal["fast", "study"] = option(
        "fast",
        "fast: the study's model without its ridges (same posterior; see harness/stats/bayes.py); "
        "study: as written",
    )

    def check(self) -> None:
        super().check()
        for name in ("target_accept", "retry_target_accept"):
            value = getattr(self, name)
            if value >= 1:
                problem = f"must be below 1 (a probability of accepting a NUTS step), got {value}"
                raise SettingsError(f"{name} {problem}", name, problem)


@dataclass(kw_only=True)
class AnalysisSettings(FitSettings):
    """`tapt-bench analyze`: which cells and effects to fit, and what to write."""

    effect: Literal["both", "bias", "boost"] = option("both", "bias: test vs extra; boost: extra vs base")
    m: int | None = option(None, "only the cells with this m")
    n: int | None = option(None, "only the cells with this n")
    json: bool = option(False, "print machine-readable posteriors instead of tables")
    plots: str | None = option(None, "folder for the PNG plots (eq. 11 and 12, trace and rank plots)")
    checks: bool = option(False, "also run the model checks: prior predictive, calibration, recovery")
    out: str | None = option(
        None, "also write the fits (and checks) as JSON here, for `tapt-bench report --analysis`"
    )


# (parametrization, centred slopes, likelihood, layout) -> the nutpie-compiled model, refitted with new data
_COMPILED: dict = {}


def sample(d: CellData, s: FitSettings, progress: bool = False):
    """NUTS on a cell's data at `target_accept`; a fit with divergences is refitted once at
    `retry_target_accept`, so the fit returned is either free of them at the first level or the one
    the higher level gives. idata.attrs holds the level it used and the first fit's divergences."""
    idata = nuts(d, s, s.target_accept, progress)
    first = divergences(idata)
    if first and s.retry_target_accept > s.target_accept:
        idata = nuts(d, s, s.retry_target_accept, progress)
        idata.attrs.update(target_accept=s.retry_target_accept, refitted_after=first)
    else:
        idata.attrs.update(target_accept=s.target_accept, refitted_after=0)
    return idata


def nuts(d: CellData, s: FitSettings, target_accept: float, progress: bool = False):
    """One NUTS fit; with nutpie the model of this layout is compiled once per process and refitted
    with each new cell's data. On every core (PyMC's own default assumes half the cores are
    hyperthreads and takes 1 of 2 here)."""
    import os

    import pymc as pm

    cores = min(s.chains, os.cpu_count() or 1)
    centered = s.parametrization == "fast" and slopes_are_informed(d)
    run = {
        "draws": s.draws,
        "tune": s.tune,
        "chains": s.chains,
        "cores": cores,
        "target_accept": target_accept,
    }
    if s.sampler == "pymc":
        with model_of(d, s.parametrization, centered, s.likelihood):
            return pm.sample(
                **run, random_seed=s.seed, progressbar=progress, compute_convergence_checks=False
            )
    import nutpie

    key = (s.parametrization, centered, s.likelihood, layout(d))
    if key not in _COMPILED:
        _COMPILED[key] = nutpie.compile_pymc_model(model_of(d, s.parametrization, centered, s.likelihood))
    compiled = _COMPILED[key]
    data = {name: v for name, v in data_of(d).items() if name in compiled.shared_data}  # what the model reads
    idata = nutpie.sample(compiled.with_data(**data), **run, seed=s.seed, progress_bar=progress)
    if "treatment" in idata.posterior.dims:  # this fit's condition names (the layout ignores them)
        idata.posterior = idata.posterior.assign_coords(treatment=d.coords["treatment"])
    return idata


def layout(d: CellData) -> str:
    """What a compiled model is specific to: the LM types, tasks and subsamples (not n, not the
    condition names)."""
    return repr({k: v for k, v in d.coords.items() if k != "treatment"})


def hdi(values: np.ndarray, prob: float) -> list[float]:
    import arviz as az

    return [float(v) for v in az.hdi(np.asarray(values).ravel(), hdi_prob=prob)]


def divergences(idata) -> int:
    return int(idata.sample_stats["diverging"].sum())


def refit_target_accept(target_accept: float) -> float:
    """The target acceptance a divergence warning tells the user to refit at: at least 0.99, else
    halfway to 1."""
    return max(0.99, round(1 - (1 - target_accept) / 2, 4))


def diagnostics(idata) -> dict[str, float]:
    """Max r-hat over every parameter (not the sampler's unconstrained internals, named ..._zerosum__
    and the like), the beta ESS and Monte Carlo standard error of its mean, and the divergences."""
    import arviz as az

    rhat = az.rhat(idata, var_names=model_variables(idata))
    ess = az.ess(idata, var_names=["beta"], method="bulk")
    tail = az.ess(idata, var_names=["beta"], method="tail")
    return {
        "rhat_max": float(max(float(rhat[v].max()) for v in rhat.data_vars)),
        "beta_rhat": float(rhat["beta"]) if "beta" in rhat else float("nan"),
        "beta_ess_bulk": float(ess["beta"]),
        "beta_ess_tail": float(tail["beta"]),
        "beta_mcse": float(az.mcse(idata, var_names=["beta"])["beta"]),
        "divergences": divergences(idata),
    }


def model_variables(idata) -> list[str]:
    return [v for v in idata.posterior.data_vars if not v.endswith("__")]


def identified_slope(idata):
    """beta + the mean treatment contrast of W: what the data identify of the treatment effect
    (b in the fast model), for comparing the samplers' mixing on the same quantity."""
    post = idata.posterior
    if "b" in post:
        return post["b"]
    return post["beta"] + (post["W"].isel(treatment=1) - post["W"].isel(treatment=0)).mean("task")


def predicted_counts(idata, d: CellData, seed: int) -> np.ndarray:
    """Posterior predictive counts Y_hat, one row per posterior draw, one column per observation."""
    import pymc as pm

    with model_of(d, idata.attrs["parametrization"]):
        pred = pm.sample_posterior_predictive(
            idata, var_names=["Y"], random_seed=seed, progressbar=False, extend_inferencedata=False
        )
    return pred.posterior_predictive["Y"].stack(draw_=("chain", "draw")).transpose("draw_", "obs").to_numpy()


def predictive_differences(y: np.ndarray, d: CellData) -> pd.DataFrame:
    """Y_hat_1 - Y_hat_0 per posterior draw, averaged over LM types and subsamples, per task (eq. 12)
    and overall (eq. 11), divided by n: one row per draw, a column per task and 'all'.

    `y` holds Y_hat for both conditions of every (i, j, k), drawn from lambda of the posterior draw."""
    o = d.obs
    diff = y * np.where(o["treated"].to_numpy() == 1, 1.0, -1.0)  # summed over a unit's two conditions
    units = o[o["treated"] == 1].groupby("task").size()
    out = {
        task: diff[:, idx].sum(axis=1) / units[task] / d.n for task, idx in o.groupby("task").indices.items()
    }
    out["all"] = diff.sum(axis=1) / units.sum() / d.n
    return pd.DataFrame(out)


def fit_cell(d: CellData, s: FitSettings) -> dict[str, Any]:
    """Fit one cell and effect; the JSON record (beta, diagnostics, eq. 11 and eq. 12) and the idata."""
    clock = time.perf_counter()
    idata = sample(d, s)
    seconds = time.perf_counter() - clock
    idata.attrs["parametrization"] = s.parametrization
    beta = idata.posterior["beta"].to_numpy().ravel()
    predicted = predicted_counts(idata, d, s.seed)
    diffs = predictive_differences(predicted, d)
    observed = observed_differences(d)
    rec = {
        "m": d.m,
        "n": d.n,
        "effect": d.effect,
        "lm_types": d.coords["lm_type"],
        "tasks": len(d.coords["task"]),
        "subsamples": len(d.coords["subsample"]),
        "observations": len(d.obs),
        "beta_mean": float(beta.mean()),
        "beta_hdi": hdi(beta, s.hdi_prob),
        "hdi_prob": s.hdi_prob,
        **diagnostics(idata),
        "target_accept": idata.attrs["target_accept"],  # the level of the fit reported (see `sample`)
        "refitted_after": idata.attrs["refitted_after"],  # divergences of the first fit, if refitted
        "seconds": seconds,
        "average_difference": {
            "mean": float(diffs["all"].mean()),
            "hdi": hdi(diffs["all"], s.hdi_prob),
            "observed": float(observed["all"]),
        },
        "per_task": [
            {
                "task": t,
                "mean": float(diffs[t].mean()),
                "hdi": hdi(diffs[t], s.hdi_prob),
                "observed": float(observed[t]),
            }
            for t in d.coords["task"]
        ],
        "settings": pick(s, FitSettings),
    }
    return {"record": rec, "idata": idata, "differences": diffs, "predicted": predicted}


def observed_differences(d: CellData) -> pd.Series:
    """The observed mean accuracy difference (treatment - control) per task and overall."""
    o = d.obs.assign(signed=np.where(d.obs["treated"] == 1, 1, -1) * d.obs["y"] / d.n)
    units = o[o["treated"] == 1].groupby("task").size()
    per_task = o.groupby("task")["signed"].sum() / units
    return pd.concat([per_task, pd.Series({"all": o["signed"].sum() / units.sum()})])


def cells_of(df: pd.DataFrame, s: AnalysisSettings, source: str) -> list[tuple[int, int, pd.DataFrame]]:
    """The (m, n) cells the settings select, each with its rows."""
    keep = np.ones(len(df), dtype=bool)
    if s.m is not None:
        keep &= (df["m"] == s.m).to_numpy()
    if s.n is not None:
        keep &= (df["n"] == s.n).to_numpy()
    chosen = df[keep]
    if chosen.empty:
        have = sorted(map(tuple, df[["m", "n"]].drop_duplicates().to_numpy().tolist()))
        raise UserError(f"{source}: no cell with m={s.m} n={s.n}; the cells there are (m, n) = {have}")
    return [(int(m), int(n), g) for (m, n), g in chosen.groupby(["m", "n"], sort=True)]


def effects_of(s: AnalysisSettings) -> list[str]:
    return ["boost", "bias"] if s.effect == "both" else [s.effect]


def fits_of(df: pd.DataFrame, s: AnalysisSettings, source: str, progress: bool = False):
    """Each selected cell and effect in turn: its label, its data and its fit (compiled once per layout)."""
    import sys

    for m, n, rows in cells_of(df, s, source):
        for effect in effects_of(s):
            d = cell_data(rows, effect, f"{source} m={m} n={n}")
            if progress:
                print(f"fitting m={m} n={n} {effect}: {d.shape}", file=sys.stderr, flush=True)
            yield f"m{m}_n{n}_{effect}", d, fit_cell(d, s)


def tasks_excluding_zero(r: dict) -> str:
    """The tasks whose eq. 12 difference has an HDI that excludes 0 in one fit, with effect and HDI."""
    prob = f"{100 * r['hdi_prob']:.0f}%"
    head = f"m={r['m']} n={r['n']} {r['effect']}: tasks whose eq.12 {prob} HDI excludes 0"
    found = sorted(
        (t for t in r["per_task"] if verdict(t["hdi"]) != "covers 0"), key=lambda t: -abs(t["mean"])
    )
    if not found:
        return f"{head}: none"
    rows = [
        f"  {t['task']:34} {100 * t['mean']:+7.2f} pts [{100 * t['hdi'][0]:+6.2f},{100 * t['hdi'][1]:+6.2f}]"
        f"  observed {100 * t['observed']:+6.2f}"
        for t in found
    ]
    return "\n".join([f"{head} ({len(found)} of {len(r['per_task'])}):", *rows])


def verdict(interval: list[float]) -> str:
    return "> 0" if interval[0] > 0 else "< 0" if interval[1] < 0 else "covers 0"


def format_fits(records: list[dict]) -> str:
    """One line per fit: beta (mean, HDI, diagnostics) and the eq. 11 average difference in points."""
    if not records:
        return ""
    prob = f"{100 * records[0]['hdi_prob']:.0f}%"
    lines = [
        f"{'m':>4} {'n':>4} {'effect':6} {'beta':>7} {prob + ' HDI':>18} {'r-hat':>6} {'div':>4} {'ESS':>6} "
        f"{'eq.11 pts':>9} {prob + ' HDI (pts)':>17} {'observed':>8}  HDI of eq.11"
    ]
    for r in records:
        a = r["average_difference"]
        lines.append(
            f"{r['m']:4d} {r['n']:4d} {r['effect']:6} {r['beta_mean']:+7.3f} "
            f"[{r['beta_hdi'][0]:+7.3f},{r['beta_hdi'][1]:+7.3f}] "
            f"{r['rhat_max']:6.3f} {r['divergences']:4d} {r['beta_ess_bulk']:6.0f} {100 * a['mean']:+9.2f} "
            f"[{100 * a['hdi'][0]:+6.2f},{100 * a['hdi'][1]:+6.2f}]  {100 * a['observed']:+8.2f}  "
            f"{verdict(a['hdi'])}"
        )
    for r in records:
        lines.append(tasks_excluding_zero(r))
    for r in records:
        if r.get("refitted_after"):
            lines.append(
                f"note: m={r['m']} n={r['n']} {r['effect']}: {r['refitted_after']} divergent transitions at "
                f"target acceptance {r['settings']['target_accept']}; refitted at {r['target_accept']}"
            )
    for r in records:
        if r["divergences"]:
            ta = r.get("target_accept", r["settings"]["target_accept"])  # records written before the refit
            lines.append(
                f"warning: m={r['m']} n={r['n']} {r['effect']}: {r['divergences']} divergent transitions at "
                f"target acceptance {ta}: the posterior may be biased where they occurred; refit with "
                f"--target-accept {refit_target_accept(ta)} (and more --tune) until none remain"
            )
    return "\n".join(lines)
