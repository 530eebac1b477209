"""The two-sample exposure test: did a model see the suspect documents' text, or their labels?

The suspect documents are a subsample's `test` split (the default design) or a whole released split;
the reference is a draw from the same pool that no TAPT run of the test condition saw (`extra`), or
another split or a file of the user's that the model cannot have seen (dataset inference, Maini et
al. 2024). Each document's score under the suspect model, minus its score under the base model (which
calibrates away how hard each text is), is compared between suspect and reference documents by a
one-sided permutation test of the difference of means (H1: suspect documents gained more); the other
side reads whether the reference was the one seen. The statistics are a registry (STATISTICS): the
text (minus the loss of the document's own tokens, or Min-K%++) and the label (the log-odds margin of
the true class). The base's own scores are tested the same way between the two sets (the shift check):
where the base alone separates them, the reference is not exchangeable with the suspect documents.
Internally the suspect documents are the split `test` and the reference documents the split `extra`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import comb

import numpy as np
import pandas as pd
from scipy import stats

from harness.core import conditions
from harness.core.errors import UserError
from harness.core.power import ALPHA, POWER, RESAMPLES, detectable

TEXT_SCORES = {"loss": "text", "mink++": "mink"}  # --text-score -> the doc_scores column
TEXT_UNITS = {"loss": "nats/token", "mink++": "Min-K%++ units"}
SCORE_COLUMNS = ("text", "mink", "margin")  # every per-document score doc_scores writes


@dataclass(frozen=True)
class Statistic:
    """A per-document statistic of the exposure test: which doc_scores column it reads (given the
    text score), its unit, and what a flag says the model saw."""

    column: Callable[[str], str]
    unit: Callable[[str], str]
    seen: str  # "text" or "labels"


STATISTICS = {
    "text": Statistic(TEXT_SCORES.__getitem__, TEXT_UNITS.__getitem__, "text"),
    "label": Statistic(lambda _: "margin", lambda _: "nats of log-odds", "labels"),
}


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
    out["detectable"] = detectable(float(spread), df)
    return out


def two_sided(result: dict) -> float:
    """The two-sided p-value of a two_sample result (either set may score higher)."""
    return min(1.0, 2 * min(result["p_test"], result["p_extra"]))


def calibrate(suspect: pd.DataFrame, reference: pd.DataFrame | None) -> pd.DataFrame:
    """Per document, the suspect's scores minus the reference's (as they are without a reference)."""
    if reference is None:
        return suspect
    keys = ["split", "row"]
    joined = suspect.merge(reference, on=keys, suffixes=("", "_ref"), validate="one_to_one")
    return joined.assign(**{c: joined[c] - joined[f"{c}_ref"] for c in SCORE_COLUMNS})[suspect.columns]


def split_scores(scores: pd.DataFrame, text_score: str) -> dict[str, dict[str, np.ndarray]]:
    """Per statistic, its per-document values on the suspect (`test`) and reference (`extra`) sets."""
    return {
        name: {
            s: scores.loc[scores["split"] == s, stat.column(text_score)].to_numpy() for s in ("test", "extra")
        }
        for name, stat in STATISTICS.items()
    }


def exposure_test(
    suspect: pd.DataFrame,
    reference: pd.DataFrame | None,
    text_score: str = "loss",
    seed: int = 0,
    names: dict[str, str] | None = None,
) -> dict:
    """Every statistic for one model: per-doc scores (doc_scores) of the suspect (split `test`) and
    reference (split `extra`) documents under the suspect model and, when given, the reference model,
    whose own scores are the shift check. `names` says what the two sets are, for the verdict."""
    scores = calibrate(suspect, reference)
    check_sizes(*(int((scores["split"] == s).sum()) for s in ("test", "extra")))
    out = {
        "calibrated": reference is not None,
        "text_score": text_score,
        "alpha": ALPHA,
        "names": names or {"test": "test", "extra": "extra"},
    }
    for name, values in split_scores(scores, text_score).items():
        out[name] = two_sample(values["test"], values["extra"], seed)
    if reference is not None:  # the shift check: the base's own scores, suspect against reference
        out["shift"] = {}
        for name, v in split_scores(reference, text_score).items():
            r = two_sample(v["test"], v["extra"], seed)
            out["shift"][name] = r | {"p_two_sided": two_sided(r)}
    return out


def flags(result: dict) -> dict[str, bool]:
    """Which exposures the result shows at alpha: each statistic for the suspect documents, and the
    other side of the text statistic (the reference's text)."""
    a = result["alpha"]
    return {name: result[name]["p_test"] <= a for name in STATISTICS} | {
        "extra_text": result["text"]["p_extra"] <= a
    }


def shifted(result: dict) -> list[str]:
    """The statistics whose base scores alone separate the two sets (two-sided, at alpha)."""
    return [name for name, r in result.get("shift", {}).items() if r["p_two_sided"] <= result["alpha"]]


def verdict(result: dict) -> list[str]:
    """The result in words: a line per statistic (and caveats: uncalibrated, a shifted reference)."""
    a, names, seen = result["alpha"], result["names"], flags(result)
    suspect, reference = names["test"], names["extra"]
    lines = []
    if not result["calibrated"]:
        lines.append(
            "UNCALIBRATED: no base model was scored to subtract; a suspect set that is easier for any "
            "model reads as exposure"
        )
    shift = shifted(result)
    for name in shift:
        lines.append(
            f"REFERENCE SHIFTED: the base alone separates {suspect} from {reference} on the {name} "
            f"statistic (two-sided p {result['shift'][name]['p_two_sided']:.4g} <= {a}): they are not "
            "exchangeable, so the calibrated result rests on the base's calibration alone; prefer a "
            "reference of the same distribution"
        )
    for name, stat in STATISTICS.items():
        r, what = result[name], f"{stat.seen} of {suspect}"
        caveat = " (UNRELIABLE: the reference is shifted on this statistic)" if name in shift else ""
        if seen[name]:
            lines.append(f"{what}: SEEN (p {r['p_test']:.4g} <= {a}){caveat}")
        elif r["p_extra"] <= a:
            lines.append(
                f"{what}: not seen; the {stat.seen} of the reference {reference} WERE "
                f"(p {r['p_extra']:.4g} <= {a}): the model saw the reference{caveat}"
            )
        else:
            lines.append(
                f"{what}: no evidence of it (p {r['p_test']:.4g}); a gain above {r['detectable']:.4g} "
                f"would have been seen with {POWER:.0%} power{caveat}"
            )
    return lines


def format_result(result: dict) -> str:
    lines = [f"  {'statistic':11} {'effect':>9} {'95% interval':>21} {'p(test)':>9} {'p(extra)':>9}"]
    rows = [(name, result[name], "") for name in STATISTICS]
    rows += [(name, r, "base alone, ") for name, r in result.get("shift", {}).items()]
    for name, r, shift in rows:
        unit = STATISTICS[name].unit(result["text_score"])
        lines.append(
            f"  {(shift and 'shift ') + name:11} {r['effect']:+9.4f} "
            f"[{r['ci_low']:+9.4f}, {r['ci_high']:+9.4f}] "
            f"{r['p_test']:9.4g} {r['p_extra']:9.4g}  ({shift}{unit}, suspect - reference)"
        )
    return "\n".join(lines + verdict(result))


def twin_label_test(scores: dict[str, pd.DataFrame], reference: str, seed: int = 0) -> dict[str, dict]:
    """The label statistic each model reads on the text it saw: the calibrated margins of a condition
    that trained on test, on test's documents, against those of its twin (the same adaptation on
    extra's text, without answers) on extra's documents. Text exposure moves both alike; only labels
    seen set them apart."""
    twin = next(
        (c for c, (split, answers) in conditions.TAPT.items() if split == conditions.EXTRA and not answers),
        None,
    )
    if twin not in scores:
        return {}
    calibrated = {c: calibrate(df, scores[reference]) for c, df in scores.items()}
    on_extra = calibrated[twin].loc[calibrated[twin]["split"] == conditions.EXTRA, "margin"].to_numpy()
    out = {}
    for cond, (split, _) in conditions.TAPT.items():
        if split == conditions.TEST and cond in scores:
            df = calibrated[cond]
            out[cond] = two_sample(
                df.loc[df["split"] == conditions.TEST, "margin"].to_numpy(), on_extra, seed
            )
    return out


def condition_tests(scores: dict[str, pd.DataFrame], reference: str, text_score: str, seed: int = 0) -> dict:
    """A grid unit's exposure record: every document's scores per condition, each condition's test
    against the reference condition (the reference's own test is the uncalibrated statistic), and the
    twin label test of the conditions that trained on test."""
    ref = scores[reference]
    tests = {
        c: exposure_test(df, None if c == reference else ref, text_score, seed) for c, df in scores.items()
    }
    for cond, result in twin_label_test(scores, reference, seed).items():
        tests[cond]["label_twin"] = result
    return {
        "text_score": text_score,
        "docs": ref[["split", "row", "label"]].to_dict("list"),
        "scores": {c: df[list(SCORE_COLUMNS)].to_dict("list") for c, df in scores.items()},
        "tests": tests,
    }
