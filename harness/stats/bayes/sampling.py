"""NUTS on one cell's data: how it is fitted (`FitSettings`), the compiled model of each layout, the
refit of a fit that diverged, and the diagnostics every fit reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from harness.core.plumbing.errors import SettingsError
from harness.core.plumbing.settings import Settings, option
from harness.stats.bayes.bayes import CellData, data_of, model_of, slopes_are_informed


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
    BELOW = {"hdi_prob": 1.0}  # a mass of 1 or more is no interval: checked before any sampling

    chains: int = option(4, "NUTS chains")
    draws: int = option(1000, "draws per chain kept")
    tune: int = option(500, "tuning steps per chain")
    seed: int = option(0, "seed of the sampler and of the posterior predictive draws")
    hdi_prob: float = option(0.89, "probability mass of the reported highest-density intervals")
    target_accept: float = option(0.8, "NUTS target acceptance (PyMC's and nutpie's default)")
    retry_target_accept: float = option(
        0.95,
        "a fit with divergences is refitted once, with the same seed, at this target acceptance when it "
        "is higher (0.8 diverged on small grids of few tasks); 0: never",
    )
    sampler: Literal["nutpie", "pymc"] = option("nutpie", "NUTS implementation (nutpie: compiled with numba)")
    likelihood: Literal["kernel", "binomial"] = option(
        "kernel",
        "what NUTS evaluates: kernel: the binomial log-likelihood less its constant, on the grid of "
        "counts (same posterior, a third of the cost); binomial: PyMC's Binomial per observation",
    )
    parametrization: Literal["fast", "study"] = option(
        "fast",
        "fast: the study's model reparametrised without its ridges (the same posterior, sampled faster); "
        "study: as written",
    )

    def check(self) -> None:
        super().check()
        for name in ("target_accept", "retry_target_accept"):
            value = getattr(self, name)
            if value >= 1:
                problem = f"must be below 1 (a probability of accepting a NUTS step), got {value}"
                raise SettingsError.of(name, problem)


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
