"""Meta-analysis of single-subsample conclusions (the study's §10, Appendix F): how often a study
that ran one subsample per task would have concluded a bias; and whether the subsample-level
biases of two LM types on the same subsamples agree more than chance pairings do."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness.core.design.conditions import EFFECTS
from harness.core.plumbing.errors import UserError
from harness.core.plumbing.settings import option, pick
from harness.stats.bayes.analysis import AnalysisSettings
from harness.stats.bayes.bayes import cell_data
from harness.stats.bayes.sampling import FitSettings, divergences, refit_target_accept, sample


@dataclass(kw_only=True)
class MetaAnalysisSettings(AnalysisSettings):
    """`tapt-bench analyze` with the keys of `analyze meta`: S de-replicated slices of one cell
    (--m, --n), one fit each."""

    MINIMUM = {"slices": 1, "rope": 0.0, "permutations": 1}

    slices: int = option(500, "meta: random slices, each one subsample per task (more: smoother, longer)")
    rope: float = option(
        0.04, "meta: the share of slices whose posterior mean of beta lies outside (-rope, rope)"
    )
    permutations: int = option(1000, "meta: random pairings for the null of the LM-type correlation")
    target_accept: float = option(
        0.95,
        "NUTS target acceptance (slices of one subsample per task nearly all diverge at 0.8 and would "
        "be refitted)",
    )

    def check_meta_analysis(self) -> None:
        if self.m is None or self.n is None:
            raise UserError("analyze meta fits slices of one cell: name it with --m and --n")
        if self.parametrization != "fast" or self.sampler != "nutpie":
            raise UserError(
                "the meta-analysis refits one compiled model on new data: it needs "
                "--parametrization fast --sampler nutpie"
            )


def slices(rows: pd.DataFrame, count: int, seed: int) -> list[pd.DataFrame]:
    """`count` random slices of a cell: for each task one subsample, drawn at random, with the rows
    of every LM type on it (they share V_jk)."""
    rng = np.random.default_rng(seed)
    tasks = sorted(rows["task"].unique())
    subsamples = {t: np.sort(rows.loc[rows["task"] == t, "subsample"].unique()) for t in tasks}
    out = []
    for _ in range(count):
        pick = {t: rng.choice(subsamples[t]) for t in tasks}
        chosen = rows[rows["subsample"].to_numpy() == rows["task"].map(pick).to_numpy()]
        out.append(chosen.assign(subsample=0))
    return out


def meta_analysis(
    rows: pd.DataFrame, s: MetaAnalysisSettings, effect: str, progress: bool = True
) -> dict[str, Any]:
    """The posterior mean of beta in each slice: compiled once (nutpie), refitted with each slice's counts."""
    from tqdm import tqdm

    parts = slices(rows, s.slices, s.seed)
    first = cell_data(parts[0], effect)
    clock = time.perf_counter()
    means, diverging, refitted = [], [], 0
    for number, part in enumerate(tqdm(parts, desc="meta-analysis slices", unit="fit", disable=not progress)):
        d = cell_data(part, effect)
        if d.coords != first.coords:
            raise UserError(
                "slices of one cell must share their layout (same LM types and tasks in every slice)"
            )
        trace = sample(d, dataclasses.replace(s, seed=s.seed + number))
        means.append(float(trace.posterior["beta"].mean()))
        diverging.append(divergences(trace))
        refitted += trace.attrs["refitted_after"] > 0
    means = np.array(means)
    return {
        "m": s.m,
        "n": s.n,
        "effect": effect,
        "slices": s.slices,
        "rope": s.rope,
        "share_outside": float((np.abs(means) >= s.rope).mean()),
        "quantiles": dict(
            zip(
                ["0.05", "0.25", "0.5", "0.75", "0.95"],
                map(float, np.quantile(means, [0.05, 0.25, 0.5, 0.75, 0.95])),
            )
        ),
        "seconds": time.perf_counter() - clock,
        "divergences": sum(diverging),
        "slices_with_divergences": sum(d > 0 for d in diverging),
        "slices_refitted": refitted,  # diverged at target_accept, refitted at retry_target_accept
        "settings": pick(s, FitSettings),
        "posterior_means": means.tolist(),
    }


def format_meta_analysis(result: dict, agreement: dict | None, source: str) -> str:
    """The text report of one effect's meta-analysis and, with two LM types, their agreement."""
    s, q = result["settings"], result["quantiles"]
    lines = [
        f"{source} m={result['m']} n={result['n']} {result['effect']}: {result['slices']} slices (one "
        f"subsample per task), {s['chains']} chains x {s['draws']} draws each; {result['seconds']:.0f} s",
        f"  posterior mean of beta per slice: 5% {q['0.05']:+.3f}  25% {q['0.25']:+.3f}  median "
        f"{q['0.5']:+.3f}  75% {q['0.75']:+.3f}  95% {q['0.95']:+.3f}",
        f"  share outside (-{result['rope']}, {result['rope']}): {100 * result['share_outside']:.1f}%",
    ]
    if result["slices_refitted"]:
        lines.append(
            f"  note: {result['slices_refitted']} of {result['slices']} slices diverged at target acceptance "
            f"{s['target_accept']} and were refitted at {s['retry_target_accept']}"
        )
    if result["divergences"]:
        # divergences left after a refit are at the retry level; with none refitted, at the first
        ta = s["retry_target_accept"] if result["slices_refitted"] else s["target_accept"]
        lines.append(
            f"  warning: {result['divergences']} divergent transitions in "
            f"{result['slices_with_divergences']} "
            f"of {result['slices']} slices at target acceptance {ta}; refit with "
            f"--target-accept {refit_target_accept(ta)}"
        )
    if agreement:
        a = agreement
        lines.append(
            f"  {a['lm_types'][0]} vs {a['lm_types'][1]} subsample-level {result['effect']}, Spearman per "
            f"(m, n, task), {a['groups']} groups (all cells): mean rho {a['mean_rho']:+.3f} "
            f"({100 * a['share_positive']:.0f}% positive); random pairings {a['null_mean_rho']:+.3f} +- "
            f"{a['null_sd']:.3f}; p = {a['p_value']:.4f}"
        )
    return "\n".join(lines)


def lm_type_agreement(df: pd.DataFrame, effect: str, permutations: int, seed: int) -> dict[str, Any] | None:
    """Spearman correlation, per (m, n, task), between two LM types' subsample-level effects
    (treatment - control on the same subsample), against random pairings of their subsamples.

    None when the results hold other than two LM types."""
    from scipy import stats

    types = sorted(df["model"].unique())
    if len(types) != 2:
        return None
    control, treatment = EFFECTS[effect]
    df = df.assign(effect=df[treatment] - df[control])
    wide = df.pivot_table(index=["m", "n", "task", "subsample"], columns="model", values="effect").dropna()
    rng = np.random.default_rng(seed)
    groups = [
        (key, g[types[0]].to_numpy(), g[types[1]].to_numpy())
        for key, g in wide.groupby(level=["m", "n", "task"])
        if len(g) >= 3
    ]

    def rho(a, b):
        r = stats.spearmanr(a, b).statistic
        return 0.0 if np.isnan(r) else float(r)

    observed = np.array([rho(a, b) for _, a, b in groups])
    null = np.array(
        [np.mean([rho(a, rng.permutation(b)) for _, a, b in groups]) for _ in range(permutations)]
    )
    return {
        "lm_types": types,
        "effect": effect,
        "groups": len(groups),
        "mean_rho": float(observed.mean()),
        "share_positive": float((observed > 0).mean()),
        "null_mean_rho": float(null.mean()),
        "null_sd": float(null.std()),
        "p_value": float((1 + (null >= observed.mean()).sum()) / (1 + permutations)),
        "per_cell": [
            {"m": int(k[0]), "n": int(k[1]), "task": k[2], "rho": r} for (k, _, _), r in zip(groups, observed)
        ],
    }
