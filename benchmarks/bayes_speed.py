"""Speed of `tapt-bench analyze` on a family of the study's released accuracies, and its posteriors,
side by side for several fit settings in one run.

Each variant fits every selected cell and effect (default: all of bert_gpt2, 16 fits) as `analyze`
does: compile (once per layout), NUTS, the posterior predictive differences and the diagnostics.
A variant is parametrization/sampler/likelihood (see `tapt-bench analyze --help`), optionally with a
fourth part, a target acceptance fitted once with no refit; the first variant is the baseline.
`fast/nutpie/kernel/0.95` is the default before the refit on divergence (one fit at 0.95),
`fast/nutpie/kernel` today's (0.8, refitted at 0.95 if it diverges). Prints per fit and variant the
wall seconds, beta's mean and HDI, the largest r-hat, the divergences, beta's bulk ESS per second,
the target acceptance of the fit reported and how far beta's mean lies from the baseline's in Monte
Carlo standard errors; then each variant's total and its ratio to the baseline. Usage:
    python benchmarks/bayes_speed.py [--results ../shared/reference/accuracies/bert_gpt2] [--m 100 --n 500]
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from harness.core.plumbing.settings import option, parse_script
from harness.results import collect
from harness.stats.bayes import sampling
from harness.stats.bayes.analysis import AnalysisSettings, fits_of


@dataclass(kw_only=True)
class BayesBenchArgs(AnalysisSettings):
    """The family to fit and the variants to compare (the first is the baseline)."""

    SMOKE = {"chains": 1, "draws": 20, "tune": 20, "m": 100, "n": 500, "effect": "bias"}

    results: str = option("../shared/reference/accuracies/bert_gpt2", "results dir in the study's layout")
    variants: list[str] = option(
        ["fast/nutpie/kernel/0.95", "fast/nutpie/kernel"],
        "parametrization/sampler/likelihood[/target acceptance, no refit]; the first is the baseline",
    )


def main() -> None:
    a = parse_script(BayesBenchArgs, __doc__)
    df = collect(a.results)
    print(
        f"{a.results} m={a.m or 'all'} n={a.n or 'all'} effect {a.effect}: {a.chains} chains x {a.draws} "
        f"draws after {a.tune} tuning, target acceptance {a.target_accept}"
    )
    print(
        f"{'fit':22} {'variant':22} {'wall s':>7} {'beta':>8} {f'{a.hdi_prob:.0%} HDI':>20} "
        f"{'r-hat':>6} {'div':>4} {'ESS/s':>7} {'accept':>6} {'z vs base':>9}"
    )
    totals, baseline_fits = {}, {}
    for variant in a.variants:
        parametrization, sampler, likelihood, *accept = variant.split("/")
        s = dataclasses.replace(a, parametrization=parametrization, sampler=sampler, likelihood=likelihood)
        if accept:
            s = dataclasses.replace(s, target_accept=float(accept[0]), retry_target_accept=0.0)
        sampling._COMPILED.clear()  # each variant pays its own compiles, as a fresh `analyze` would
        clock = time.perf_counter()
        for label, _, fit in fits_of(df, s, a.results):
            wall = time.perf_counter() - clock
            r = fit["record"]
            base = baseline_fits.setdefault(label, r)
            z = (r["beta_mean"] - base["beta_mean"]) / (r["beta_mcse"] ** 2 + base["beta_mcse"] ** 2) ** 0.5
            print(
                f"{label:22} {variant:22} {wall:7.1f} {r['beta_mean']:+8.4f} "
                f"[{r['beta_hdi'][0]:+8.4f},{r['beta_hdi'][1]:+8.4f}] {r['rhat_max']:6.3f} "
                f"{r['divergences']:4d} {r['beta_ess_bulk'] / wall:7.1f} {r['target_accept']:6.2f} {z:+9.2f}",
                flush=True,
            )
            totals[variant] = totals.get(variant, 0.0) + wall
            clock = time.perf_counter()
    baseline = totals[a.variants[0]]
    for variant, seconds in totals.items():
        print(f"total {variant:22} {seconds:8.1f} s   ratio to {a.variants[0]}: {baseline / seconds:5.2f}x")


if __name__ == "__main__":
    main()
