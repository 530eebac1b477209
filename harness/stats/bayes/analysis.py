"""Fits of the hierarchical model per (m, n) cell and effect: beta and the posterior predictive
accuracy differences (the study's eq. 11 and 12). A model is compiled once per layout (its coords)
and refitted with each cell's, effect's or replicate's data (see `sampling`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from harness import results
from harness.core.design import conditions
from harness.core.plumbing.errors import UserError
from harness.core.plumbing.settings import option, pick
from harness.stats.bayes.bayes import CellData, cell_data, model_of
from harness.stats.bayes.sampling import FitSettings, diagnostics, refit_target_accept, sample


@dataclass(kw_only=True)
class AnalysisSettings(FitSettings):
    """`tapt-bench analyze`: which cells and effects to fit, and what to write."""

    HOME = ("out",)

    MINIMUM = {"subsamples": 1}

    effect: Literal[("both", *conditions.EFFECTS)] = option(  # the effects, from their one home
        "both",
        "both: the study's boost and bias; or one effect: "
        + ", ".join(f"{e} ({t} vs {c})" for e, (c, t) in conditions.EFFECTS.items()),
    )
    m: int | None = option(None, "only the cells with this m")
    n: int | None = option(None, "only the cells with this n")
    models: list[str] = option(
        [], "only these models, as the results name them (a methods study's <model>+<method>); empty: all"
    )
    subsamples: int | None = option(
        None,
        "only the first K subsamples of every model and task: the model needs the same subsamples "
        "everywhere, which a grid still running, or a task ahead of the others, lacks",
    )
    json: bool = option(False, "print machine-readable posteriors instead of tables")
    plots: str | None = option(None, "folder for the PNG plots (eq. 11 and 12, trace and rank plots)")
    every_task: bool = option(
        False, "print every task's accuracy difference (eq. 12) with its HDI, not only those excluding 0"
    )
    checks: bool = option(False, "also run the model checks: prior predictive, calibration, recovery")
    out: str | None = option(
        None, "also write the fits (and checks) as JSON here, for `tapt-bench report --analysis`"
    )


def hdi(values: np.ndarray, prob: float) -> list[float]:
    import arviz as az

    return [float(v) for v in az.hdi(np.asarray(values).ravel(), hdi_prob=prob)]


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
    if s.models:
        unknown = sorted(set(s.models) - set(df["model"]))
        if unknown:
            have = sorted(df["model"].unique())
            raise UserError(f"{source}: no model {unknown} (--models); the models there are {have}")
        keep &= df["model"].isin(s.models).to_numpy()
    if s.subsamples is not None:
        keep &= (df["subsample"] < s.subsamples).to_numpy()
    chosen = df[keep]
    if chosen.empty:
        have = sorted(map(tuple, df[["m", "n"]].drop_duplicates().to_numpy().tolist()))
        raise UserError(f"{source}: no cell with m={s.m} n={s.n}; the cells there are (m, n) = {have}")
    return [(int(m), int(n), g) for (m, n), g in chosen.groupby(["m", "n"], sort=True)]


def effects_of(s: AnalysisSettings) -> list[str]:
    return list(conditions.STUDIED) if s.effect == "both" else [s.effect]


def fits_of(df: pd.DataFrame, s: AnalysisSettings, source: str, progress: bool = False):
    """Each selected cell and effect in turn: its label, its data and its fit (compiled once per layout)."""
    import sys

    for m, n, rows in cells_of(df, s, source):
        for effect in effects_of(s):
            # an LM type (method) with a unit whose condition was not adapted is not a measurement of it:
            # left out of this effect's fit whole (the model shares V_jk over the LM types of a subsample)
            unmeasured = sorted(rows.loc[~results.measured(rows, effect), "model"].unique())
            if unmeasured:
                print(
                    f"m={m} n={n} {effect}: left out {unmeasured}: a condition of the effect was not adapted "
                    "in some of their units (see `tapt-bench summarize`)",
                    file=sys.stderr,
                    flush=True,
                )
            kept = rows[~rows["model"].isin(unmeasured)]
            if kept.empty:
                continue
            d = cell_data(kept, effect, f"{source} m={m} n={n}")
            if progress:
                print(f"fitting m={m} n={n} {effect}: {d.shape}", file=sys.stderr, flush=True)
            yield f"m{m}_n{n}_{effect}", d, fit_cell(d, s)


def tasks_excluding_zero(r: dict, every_task: bool = False) -> str:
    """The tasks whose eq. 12 difference has an HDI that excludes 0 in one fit (or every task), with
    effect and HDI."""
    prob = f"{100 * r['hdi_prob']:.0f}%"
    which = "every task's eq.12" if every_task else f"tasks whose eq.12 {prob} HDI excludes 0"
    head = f"m={r['m']} n={r['n']} {r['effect']}: {which}"
    found = sorted(
        (t for t in r["per_task"] if every_task or verdict(t["hdi"]) != "covers 0"),
        key=lambda t: -abs(t["mean"]),
    )
    if not found:
        return f"{head}: none"
    rows = [
        f"  {t['task']:34} {100 * t['mean']:+7.2f} pts [{100 * t['hdi'][0]:+6.2f},{100 * t['hdi'][1]:+6.2f}]"
        f"  observed {100 * t['observed']:+6.2f}" + (f"  {verdict(t['hdi'])}" if every_task else "")
        for t in found
    ]
    return "\n".join([f"{head} ({len(found)} of {len(r['per_task'])}):", *rows])


def verdict(interval: list[float]) -> str:
    return "> 0" if interval[0] > 0 else "< 0" if interval[1] < 0 else "covers 0"


def format_fits(records: list[dict], every_task: bool = False) -> str:
    """One line per fit: beta (mean, HDI, diagnostics) and the eq. 11 average difference in points; then
    per fit the tasks whose eq. 12 HDI excludes 0 (or every task's)."""
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
        lines.append(tasks_excluding_zero(r, every_task))
    for r in records:
        if r["refitted_after"]:
            lines.append(
                f"note: m={r['m']} n={r['n']} {r['effect']}: {r['refitted_after']} divergent transitions at "
                f"target acceptance {r['settings']['target_accept']}; refitted at {r['target_accept']}"
            )
    for r in records:
        if r["divergences"]:
            ta = r["target_accept"]
            lines.append(
                f"warning: m={r['m']} n={r['n']} {r['effect']}: {r['divergences']} divergent transitions at "
                f"target acceptance {ta}: the posterior may be biased where they occurred; refit with "
                f"--target-accept {refit_target_accept(ta)} (and more --tune) until none remain"
            )
    return "\n".join(lines)
