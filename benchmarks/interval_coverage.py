"""How often the summary's 95% interval of a pooled bias holds the truth, on simulated studies of the
shapes the grid's units take: continuous, the shipped confirmatory study's (most units tied at 0,
steps of 1/32), a third of units tied at 0, and the study's released BERT units (steps of 1/50).

Each study draws K per-unit biases from a shape whose mean is the truth (+2 points), and computes
harness.stats.summary.sign_flip's interval (exact signs up to 22 units, 10,000 drawn above). An interval holds
the truth where low <= truth <= high, its edges included (within 1e-9: the interval is closed).

    python benchmarks/interval_coverage.py [--studies 1000] [--reference ../shared/reference]
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import results  # noqa: E402
from harness.core.plumbing.settings import Settings, option, parse_script  # noqa: E402
from harness.stats.summary.sign_flip import SignFlip  # noqa: E402

TRUTH, EDGE = 0.02, 1e-9
SHIPPED = ROOT / "studies" / "methods_confirm"
SHIPPED_MODEL = "SmolLM2-135M-Instruct@lr=0.0002"


def unit_biases(root: Path, **only) -> np.ndarray:
    """The per-unit biases (test - extra) of a results folder (the rows whose columns equal `only`)."""
    df = results.collect(root)
    for column, value in only.items():
        df = df[df[column] == value]
    return (df["test"] - df["extra"]).to_numpy(float)


def resampled(values: np.ndarray):
    """A shape that resamples `values` moved to mean 0, then adds the truth: its ties and steps kept."""
    centred = values - values.mean()
    return lambda rng, k: rng.choice(centred, k) + TRUTH


def normal(rng, k):
    return rng.normal(TRUTH, 0.075, k)


def tied_at_zero(rng, k):
    """A third of units exactly 0 (extra and test models that agree on every document), the rest in
    steps of 1/32 around 1.5 x the truth, so the mean is the truth."""
    moved = rng.choice(np.arange(-4, 5), k) / 32 + 1.5 * TRUTH  # the steps' mean is 0
    return np.where(rng.random(k) < 1 / 3, 0.0, moved)


def coverage(draw, k: int, studies: int, seed: int = 0) -> tuple[float, int, int]:
    """The share of `studies` simulated studies of k units whose interval holds the truth, and the
    misses below (the interval ends under it) and above."""
    rng = np.random.default_rng(seed)
    below = above = 0
    for s in range(studies):
        low, high = SignFlip(draw(rng, k), seed=s).interval()
        below += high < TRUTH - EDGE
        above += low > TRUTH + EDGE
    return 1 - (below + above) / studies, below, above


def shapes(reference: Path | None) -> dict:
    found = {"continuous (normal, sd 7.5 pts)": normal, "a third tied at 0, steps of 1/32": tied_at_zero}
    if (SHIPPED / "m8").is_dir():
        found["shipped lr 2e-4 (14 of 21 at 0, steps of 1/32)"] = resampled(
            unit_biases(SHIPPED, model=SHIPPED_MODEL)
        )
    released = reference / "accuracies" / "bert_gpt2"
    if (released / "m50" / "n50" / "bert").is_dir():
        biases = unit_biases(released, m=50, n=50, model="bert")
        found["the study's BERT units at m 50 / n 50 (steps of 1/50)"] = resampled(biases)
    return found


@dataclass(kw_only=True)
class CoverageArgs(Settings):
    SMOKE = {"studies": 20, "k": [7]}
    MINIMUM = {"studies": 1}

    studies: int = option(1000, "simulated studies per K and shape")
    k: list[int] = option([7, 21, 120], "units a study (each at least 2)")
    reference: str = option(str(ROOT.parent / "shared" / "reference"), "the study's release: its BERT units")


def main(argv: list[str] | None = None) -> None:
    args = parse_script(CoverageArgs, __doc__, argv)
    if min(args.k) < 2:
        sys.exit(f"error: --k must be at least 2 units a study, got {args.k}")
    print(f"truth +{100 * TRUTH:.0f} pts; 95% two-sided intervals; {args.studies} studies a row")
    print(f"{'K':>4}  {'shape':52} {'coverage':>8} {'below':>6} {'above':>6}")
    for k in args.k:
        for name, draw in shapes(Path(args.reference)).items():
            held, below, above = coverage(draw, k, args.studies)
            print(f"{k:4d}  {name:52} {held:8.1%} {below:6d} {above:6d}")


if __name__ == "__main__":
    main()
