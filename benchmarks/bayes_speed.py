"""Speed of the hierarchical model's fit: beta's effective samples per second, side by side.

Fits one cell of the study's released accuracies (default: bert_gpt2, m=100, n=500, bias: 2,000
observations) with the study's model as written on PyMC's own NUTS (the baseline) and with each
other (parametrization, sampler) pair at --target-accept, the study's 4 chains x 1,000 draws after
500 tuning steps. The baseline keeps PyMC's default target acceptance, 0.8.
Wall time includes compilation. Prints beta's bulk ESS per second and its ratio to the baseline, the
same for the identified slope (beta + the mean treatment contrast of W, which the data pin down;
in the fast model beta adds independent conditional noise to it, which mixes perfectly), the
largest r-hat over all parameters (and which), and the divergences. Usage:
    python benchmarks/bayes_speed.py [--results ../shared/reference/accuracies/bert_gpt2] [--m 100 --n 500]
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import arviz as az

from harness.core.settings import option, parse_script
from harness.results import collect
from harness.stats.analysis import FitSettings, identified_slope, model_variables, sample
from harness.stats.bayes import cell_data


@dataclass(kw_only=True)
class BayesBenchArgs(FitSettings):
    """The cell to fit and the variants to compare (the first is the baseline)."""

    SMOKE = {"chains": 1, "draws": 20, "tune": 20, "variants": ["study/pymc", "fast/nutpie"]}

    results: str = option("../shared/reference/accuracies/bert_gpt2", "results dir in the study's layout")
    m: int = option(100, "the cell's m")
    n: int = option(500, "the cell's n")
    effect: str = option("bias", "bias or boost")
    variants: list[str] = option(
        ["study/pymc", "study/nutpie", "fast/pymc", "fast/nutpie"],
        "parametrization/sampler pairs; the first is the baseline",
    )


def main() -> None:
    a = parse_script(BayesBenchArgs, __doc__)
    df = collect(a.results)
    d = cell_data(df[(df["m"] == a.m) & (df["n"] == a.n)], a.effect, a.results)
    print(
        f"{a.results} m={a.m} n={a.n} {a.effect}: {d.shape}; {a.chains} chains x {a.draws} draws "
        f"after {a.tune} "
        f"tuning; target acceptance 0.8 (baseline), {a.target_accept} (others)"
    )
    print(
        f"{'variant':14} {'wall s':>7} {'beta ESS':>9} {'ESS/s':>7} {'ratio':>6} "
        f"{'slope ESS/s':>11} {'ratio':>6} "
        f"{'max r-hat':>9} {'(of)':8} {'div':>4}"
    )
    base_rate = base_slope = None
    for variant in a.variants:
        parametrization, sampler = variant.split("/")
        s = dataclasses.replace(
            a,
            parametrization=parametrization,
            sampler=sampler,
            target_accept=a.target_accept if base_rate else 0.8,
        )
        clock = time.perf_counter()
        idata = sample(d, s)
        wall = time.perf_counter() - clock
        ess = float(az.ess(idata, var_names=["beta"])["beta"])
        slope = float(az.ess(identified_slope(idata).to_numpy()))
        rhat = az.rhat(idata, var_names=model_variables(idata))
        worst = max(rhat.data_vars, key=lambda v: float(rhat[v].max()))
        rate, slope_rate = ess / wall, slope / wall
        base_rate, base_slope = base_rate or rate, base_slope or slope_rate
        print(
            f"{variant:14} {wall:7.1f} {ess:9.0f} {rate:7.1f} {rate / base_rate:6.1f} {slope_rate:11.1f} "
            f"{slope_rate / base_slope:6.1f} {float(rhat[worst].max()):9.3f} {worst:8} "
            f"{int(idata.sample_stats['diverging'].sum()):4d}",
            flush=True,
        )


if __name__ == "__main__":
    main()
