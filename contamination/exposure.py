"""The two-sample exposure test: did a model see the test split's text, or its labels?

`extra` is a random draw from the same pool as `test`, disjoint from it, that no TAPT run of the
test condition saw: the unseen reference (dataset inference, Maini et al. 2024). Each document's
score under the suspect model, minus its score under the base model (which calibrates away how hard
each text is), is compared between the two splits by a one-sided permutation test of the difference
of means (H1: test documents gained more than extra documents); the other side reads whether `extra`
was the split seen. Two statistics: the text (minus the loss of the document's own tokens, or
Min-K%++) and the label (the log-odds margin of the true class).
"""

from __future__ import annotations

from math import comb

import numpy as np
import pandas as pd
from scipy import stats

from harness.core.errors import UserError

ALPHA, POWER = 0.05, 0.80
RESAMPLES = 10_000
STATISTICS = {"text": ("text", "mink"), "label": ("margin",)}  # column(s) of doc_scores per statistic
TEXT_SCORES = {"loss": "text", "mink++": "mink"}


def smallest_pvalue(n_test: int, n_extra: int) -> float:
    """The smallest p-value a permutation test of these group sizes can give: one split of C(n, k)."""
    return 1 / comb(n_test + n_extra, n_test)


def check_sizes(n_test: int, n_extra: int, alpha: float = ALPHA) -> None:
    """A test that can never reject at alpha is refused before anything is scored."""
    if smallest_pvalue(n_test, n_extra) > alpha:
        raise UserError(
            f"n = {n_test}: a permutation test of {n_test} test against {n_extra} extra documents cannot "
            f"reach p <= {alpha} (its smallest p-value is 1/{comb(n_test + n_extra, n_test)}); "
            "raise --n to at least 3"
        )


def _mean_difference(x, y, axis=-1):
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def two_sample(test: np.ndarray, extra: np.ndarray, seed: int = 0) -> dict:
    """Permutation p-values of both sides, the effect (mean test - mean extra) with its 95%
    percentile-bootstrap interval, and the smallest effect the one-sided test finds with 80% power."""
    test, extra = np.asarray(test, float), np.asarray(extra, float)
    out = {"effect": float(_mean_difference(test, extra))}
    for side, alternative in (("p_test", "greater"), ("p_extra", "less")):
        res = stats.permutation_test(
            (test, extra),
            _mean_difference,
            permutation_type="independent",
            alternative=alternative,
            n_resamples=RESAMPLES,
            vectorized=True,
            rng=np.random.default_rng(seed),
        )
        out[side] = float(res.pvalue)
    if np.ptp(np.concatenate([test, extra])) == 0:  # a model against itself: nothing to resample
        out["ci_low"] = out["ci_high"] = out["effect"]
    else:
        ci = stats.bootstrap(
            (test, extra),
            _mean_difference,
            n_resamples=RESAMPLES,
            method="percentile",
            vectorized=True,
            rng=np.random.default_rng(seed),
        ).confidence_interval
        out["ci_low"], out["ci_high"] = float(ci.low), float(ci.high)
    df = len(test) + len(extra) - 2
    spread = np.sqrt(np.var(test, ddof=1) / len(test) + np.var(extra, ddof=1) / len(extra))
    out["detectable"] = float((stats.t.ppf(1 - ALPHA, df) + stats.t.ppf(POWER, df)) * spread)
    return out


def calibrate(suspect: pd.DataFrame, reference: pd.DataFrame | None) -> pd.DataFrame:
    """Per document, the suspect's scores minus the reference's (as they are without a reference)."""
    if reference is None:
        return suspect
    keys = ["split", "row"]
    joined = suspect.merge(reference, on=keys, suffixes=("", "_ref"), validate="one_to_one")
    columns = [c for cs in STATISTICS.values() for c in cs]
    return joined.assign(**{c: joined[c] - joined[f"{c}_ref"] for c in columns})[suspect.columns]


def exposure_test(
    suspect: pd.DataFrame, reference: pd.DataFrame | None, text_score: str = "loss", seed: int = 0
) -> dict:
    """Both statistics for one model: per-doc scores (doc_scores) of the test and extra splits under
    the suspect and, when given, the reference model."""
    scores = calibrate(suspect, reference)
    test, extra = (scores[scores["split"] == s] for s in ("test", "extra"))
    check_sizes(len(test), len(extra))
    columns = {"text": TEXT_SCORES[text_score], "label": "margin"}
    out = {"calibrated": reference is not None, "text_score": text_score, "alpha": ALPHA}
    for name, col in columns.items():
        out[name] = two_sample(test[col].to_numpy(), extra[col].to_numpy(), seed)
    return out


def flags(result: dict) -> dict[str, bool]:
    """Which exposures the result shows at alpha: test text, test labels, extra text."""
    return {
        "text": result["text"]["p_test"] <= result["alpha"],
        "label": result["label"]["p_test"] <= result["alpha"],
        "extra_text": result["text"]["p_extra"] <= result["alpha"],
    }


def verdict(result: dict) -> list[str]:
    """The result in words: one line for the text, one for the labels (and a caveat if uncalibrated)."""
    a, t, lab = result["alpha"], result["text"], result["label"]
    seen = flags(result)
    lines = []
    if not result["calibrated"]:
        lines.append(
            "UNCALIBRATED: no base model was scored to subtract; a test split that is easier for any "
            "model reads as exposure"
        )
    if seen["text"]:
        lines.append(f"text of test: SEEN (p {t['p_test']:.4g} <= {a})")
    elif seen["extra_text"]:
        lines.append(
            f"text of test: not seen; the text of EXTRA was (p {t['p_extra']:.4g} <= {a}): the model "
            "saw the reference split"
        )
    else:
        lines.append(
            f"text of test: no evidence it was seen (p {t['p_test']:.4g}); a gain above "
            f"{t['detectable']:.4g} would have been seen with {POWER:.0%} power"
        )
    if seen["label"]:
        lines.append(f"labels of test: SEEN (p {lab['p_test']:.4g} <= {a})")
    else:
        lines.append(
            f"labels of test: no evidence they were seen (p {lab['p_test']:.4g}); a gain above "
            f"{lab['detectable']:.4g} would have been seen with {POWER:.0%} power"
        )
    return lines


def format_result(result: dict) -> str:
    unit = {"loss": "nats/token", "mink++": "Min-K%++ units"}[result["text_score"]]
    lines = [f"  {'statistic':10} {'effect':>9} {'95% interval':>21} {'p(test)':>9} {'p(extra)':>9}"]
    for name, what in (("text", unit), ("label", "nats of log-odds")):
        r = result[name]
        lines.append(
            f"  {name:10} {r['effect']:+9.4f} [{r['ci_low']:+9.4f}, {r['ci_high']:+9.4f}] "
            f"{r['p_test']:9.4g} {r['p_extra']:9.4g}  ({what}, test - extra)"
        )
    return "\n".join(lines + verdict(result))


def condition_tests(scores: dict[str, pd.DataFrame], reference: str, text_score: str, seed: int = 0) -> dict:
    """A grid unit's exposure record: every document's scores per condition, and each condition's
    test against the reference condition (the reference's own test is the uncalibrated statistic)."""
    ref = scores[reference]
    return {
        "text_score": text_score,
        "docs": ref[["split", "row", "label"]].to_dict("list"),
        "scores": {c: df[[*TEXT_SCORES.values(), "margin"]].to_dict("list") for c, df in scores.items()},
        "tests": {
            c: exposure_test(df, None if c == reference else ref, text_score, seed)
            for c, df in scores.items()
        },
    }
