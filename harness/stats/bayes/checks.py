"""The model checks of one fitted cell (the study's Appendix E.1): the prior predictive, the
calibration of posterior predictive mean accuracies, and the recovery of a planted beta."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.stats.bayes import plots
from harness.stats.bayes.analysis import fit_cell, hdi
from harness.stats.bayes.bayes import CellData, model_of, study_model
from harness.stats.bayes.sampling import FitSettings


def model_checks(d: CellData, fit: dict, s: FitSettings, label: str, plots_dir: str | None = None) -> dict:
    """Prior predictive, calibration and recovery for one fitted cell (their plots when asked)."""
    prior = prior_predictive(d, s)
    calib = calibration(fit["predicted"], d, s)
    recovered = recovery(d, s, fit["idata"])
    if plots_dir:
        plots.prior_predictive(prior["accuracies"], label, Path(plots_dir) / f"prior_predictive_{label}.png")
        plots.calibration(calib, label, Path(plots_dir) / f"calibration_{label}.png")
    inside = ((calib["hdi_low"] <= calib["observed"]) & (calib["observed"] <= calib["hdi_high"])).mean()
    return {
        "m": d.m,
        "n": d.n,
        "effect": d.effect,
        "prior_predictive": {k: v for k, v in prior.items() if k != "accuracies"},
        "calibration": {
            "cells": len(calib),
            "share_inside_hdi": float(inside),
            "max_abs_error": float((calib["predicted"] - calib["observed"]).abs().max()),
        },
        "recovery": recovered,
    }


def prior_predictive(d: CellData, s: FitSettings, draws: int = 500) -> dict[str, Any]:
    """Accuracies the priors alone imply (Y / n of the prior predictive), as quantiles."""
    import pymc as pm

    with model_of(d, s.parametrization):
        prior = pm.sample_prior_predictive(draws=draws, random_seed=s.seed)
    acc = prior.prior_predictive["Y"].to_numpy().ravel() / d.n
    qs = [0.05, 0.25, 0.5, 0.75, 0.95]
    return {
        "quantiles": dict(zip(map(str, qs), map(float, np.quantile(acc, qs)))),
        "share_below_0.05": float((acc < 0.05).mean()),
        "share_above_0.95": float((acc > 0.95).mean()),
        "accuracies": acc,
    }


def calibration(predicted: np.ndarray, d: CellData, s: FitSettings) -> pd.DataFrame:
    """Per (task, condition): the observed mean accuracy against the posterior predictive
    distribution of that mean (`predicted`: counts per draw and observation): its HDI, and where
    the observation falls in it as a quantile."""
    rows = []
    for (task, treated), idx in d.obs.groupby(["task", "treated"]).indices.items():
        sim = predicted[:, idx].mean(axis=1) / d.n
        obs = float(d.obs["y"].to_numpy()[idx].mean() / d.n)
        low, high = hdi(sim, s.hdi_prob)
        rows.append(
            {
                "task": task,
                "condition": d.coords["treatment"][treated],
                "observed": obs,
                "predicted": float(sim.mean()),
                "hdi_low": low,
                "hdi_high": high,
                "quantile": float((sim < obs).mean() + 0.5 * (sim == obs).mean()),
            }
        )
    return pd.DataFrame(rows)


def recovery(
    d: CellData, s: FitSettings, idata=None, betas=(0.0, 0.1), replicates: int = 4
) -> list[dict[str, Any]]:
    """Plant each beta in data shaped like the cell and refit (the study's Appendix E.1).

    Each replicate draws counts from the study's model with beta planted and the scales (and the
    LM-type effect) at their posterior means from `idata` (typical values without one); the group
    effects U, V, W come from their priors, the same draws for every planted beta. Reports how many
    replicates' HDIs cover the planted value. Note that beta is identified only up to the mean
    treatment contrast of W, which the posterior rightly treats as unknown. Every replicate refits the
    cell's compiled model with new counts."""
    import pymc as pm

    truth = {"mu": 1.0, "sigma_U": 0.7, "sigma_V": 0.3, "sigma_W": 0.1}
    if idata is not None:
        post = idata.posterior
        truth = {k: float(post[k].mean()) for k in ("sigma_U", "sigma_V", "sigma_W")}
        truth["mu"] = float(post["c"].mean()) if "c" in post else float(post["mu"].mean())
    if len(d.coords["lm_type"]) > 1:
        truth["alpha"] = (
            idata.posterior["alpha"].mean(("chain", "draw")).to_numpy()
            if idata is not None
            else np.zeros(len(d.coords["lm_type"]) - 1)
        )
    out = []
    for b in betas:
        fits = []
        for r in range(replicates):
            with pm.do(study_model(d), {**truth, "beta": b}) as planted_model:
                y = pm.draw(planted_model["Y"], random_seed=s.seed + 1 + r)
            planted = CellData(d.m, d.n, d.effect, d.obs.assign(y=np.asarray(y)), d.coords)
            fits.append(fit_cell(planted, s)["record"])
        out.append(
            {
                "planted_beta": b,
                "replicates": replicates,
                "covered": sum(f["beta_hdi"][0] <= b <= f["beta_hdi"][1] for f in fits),
                "beta_means": [f["beta_mean"] for f in fits],
                "beta_hdis": [f["beta_hdi"] for f in fits],
                "rhat_max": max(f["rhat_max"] for f in fits),
                "divergences": sum(f["divergences"] for f in fits),
                "refitted": sum(f["refitted_after"] > 0 for f in fits),  # diverged at the first level
            }
        )
    return out


def format_checks(c: dict) -> str:
    p, cal = c["prior_predictive"], c["calibration"]
    q = p["quantiles"]
    lines = [
        f"checks m={c['m']} n={c['n']} {c['effect']}:",
        f"  prior predictive accuracy: 5% {q['0.05']:.2f}  median {q['0.5']:.2f}  95% {q['0.95']:.2f}; "
        f"{100 * p['share_below_0.05']:.0f}% below 0.05, {100 * p['share_above_0.95']:.0f}% above 0.95",
        f"  calibration: {100 * cal['share_inside_hdi']:.0f}% of {cal['cells']} (task, condition) "
        "mean accuracies "
        f"inside their posterior predictive HDI; largest error {100 * cal['max_abs_error']:.2f} pts",
    ]
    for r in c["recovery"]:
        fits = ", ".join(
            f"{b:+.3f} [{h[0]:+.3f}, {h[1]:+.3f}]" for b, h in zip(r["beta_means"], r["beta_hdis"])
        )
        lines.append(
            f"  recovery: planted beta {r['planted_beta']:+.2f}: HDI covers it in {r['covered']} of "
            f"{r['replicates']} replicates: {fits} (max r-hat {r['rhat_max']:.3f}, "
            f"{r['divergences']} divergences, {r.get('refitted', 0)} refitted)"
        )
    return "\n".join(lines)
