"""The two-sample exposure test: did a model see the suspect documents' text, or their labels?

The suspect documents are a subsample's `test` split (the default design) or a whole released split;
the reference is a draw from the same pool that no TAPT run of the test condition saw (`extra`), or
another split or a file of the user's that the model cannot have seen (dataset inference, Maini et
al. 2024). Each document's score under the suspect model, minus its score under the base model (which
calibrates away how hard each text is), is compared between suspect and reference documents by a
one-sided permutation test of the difference of means (H1: suspect documents gained more); the other
side reads whether the reference was the one seen. The statistics are a registry (EXPOSURE_TESTS): the
text (minus the loss of the document's own tokens, or Min-K%++), the label (the log-odds margin of
the true class) and the confidence (the log-probability of the model's own top choice: training on its
own answers sharpens it where it trained). The base's own scores are tested the same way between the
two sets (the shift check): where the base alone separates them, the reference is not exchangeable
with the suspect documents.
Internally the suspect documents are the split `test` and the reference documents the split `extra`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import comb

import numpy as np
import pandas as pd

from contamination import codec
from contamination.shift import reference_check
from harness.core.design import conditions
from harness.core.design.power import ALPHA, RESAMPLES, detectable
from harness.core.plumbing.errors import UserError

TEXT_SCORES = {"loss": "text", "mink++": "mink"}  # --text-score -> the doc_scores column
TEXT_UNITS = {"loss": "nats/token", "mink++": "Min-K%++ units"}
SCORE_COLUMNS = ("text", "mink", "margin", "confidence")  # doc_scores' per-document scores, base-calibrated
CODEC = "codec"  # CoDeC's per-document drop (contamination.codec): the model's own, never calibrated
CODEC_BLOCK = codec.BLOCK_COLUMN
# the columns a score table holds of its own: a plug-in score takes another name
BUILT_IN_COLUMNS = {"split", "row", "label", CODEC, CODEC_BLOCK, *SCORE_COLUMNS}


@dataclass(frozen=True)
class ExposureTest:
    """A per-document statistic of the exposure test: which doc_scores column it reads (given the
    text score), its unit, and what a flag says the model saw."""

    column: Callable[[str], str]
    unit: Callable[[str], str]
    seen: str  # "text" or "labels"


LABELS_SEEN = "labels"
EXPOSURE_TESTS = {
    "text": ExposureTest(TEXT_SCORES.__getitem__, TEXT_UNITS.__getitem__, "text"),
    "label": ExposureTest(lambda _: "margin", lambda _: "nats of log-odds", LABELS_SEEN),
    # adaptation on the model's own answers: the gain in confidence in its top choice, no gold label read
    "confidence": ExposureTest(lambda _: "confidence", lambda _: "nats, top choice", "own answers"),
}


def smallest_pvalue(n_test: int, n_extra: int) -> float:
    """The smallest p-value a permutation test of these group sizes can give: one split of C(n, k)."""
    return 1 / comb(n_test + n_extra, n_test)


def check_sizes(n_test: int, n_extra: int, alpha: float = ALPHA, whole_split: bool = False) -> None:
    """A test that can never reject at alpha is refused before anything is scored."""
    if smallest_pvalue(n_test, n_extra) <= alpha:
        return
    splits = f"1/{comb(n_test + n_extra, n_test)}"
    if whole_split:
        raise UserError(
            f"a permutation test of {n_test} suspect against {n_extra} reference documents cannot reach "
            f"p <= {alpha} (its smallest p-value is {splits}); use more documents a side (--suspect-n, "
            "--reference-n, or a larger reference file)"
        )
    raise UserError(
        f"n = {n_test}: a permutation test of {n_test} test against {n_extra} extra documents cannot "
        f"reach p <= {alpha} (its smallest p-value is {splits}); raise --n to at least 3"
    )


def _mean_difference(x, y, axis=-1):
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def two_sample(test: np.ndarray, extra: np.ndarray, seed: int = 0) -> dict:
    """Permutation p-values of both sides, the effect (mean test - mean extra) with its 95%
    percentile-bootstrap interval, and the smallest effect the one-sided test finds with 80% power."""
    from scipy import stats

    test, extra = np.asarray(test, float), np.asarray(extra, float)
    out = {"effect": float(_mean_difference(test, extra))}
    res = stats.permutation_test(
        (test, extra),
        _mean_difference,
        permutation_type="independent",
        alternative="greater",
        n_resamples=RESAMPLES,
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    out["p_test"] = float(res.pvalue)
    out["p_extra"] = lower_side(res, comb(len(test) + len(extra), len(test)))
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


def lower_side(res, splits: int) -> float:
    """The lower side's p-value from the null distribution the upper side's test drew, as scipy's `less`
    computes it (its tolerance for ties; +1 where the null is sampled, not every one of `splits`). Written
    here because scipy draws the null again for each side: half of a unit's permutation time."""
    sampled = int(splits > RESAMPLES)
    gamma = np.abs(np.finfo(float).eps * 100 * res.statistic)
    below = np.count_nonzero(res.null_distribution <= res.statistic + gamma)
    return float(np.clip((below + sampled) / (len(res.null_distribution) + sampled), 0.0, 1.0))


def two_sided(result: dict) -> float:
    """The two-sided p-value of a two_sample result (either set may score higher)."""
    return min(1.0, 2 * min(result["p_test"], result["p_extra"]))


def calibrate(suspect: pd.DataFrame, reference: pd.DataFrame | None) -> pd.DataFrame:
    """Per document, the suspect's scores minus the reference's (as they are without a reference)."""
    if reference is None:
        return suspect
    keys = ["split", "row"]
    joined = suspect.merge(reference, on=keys, suffixes=("", "_ref"), validate="one_to_one")
    own = [c for c in SCORE_COLUMNS if c in suspect]  # a record from before a score was added lacks it
    return joined.assign(**{c: joined[c] - joined[f"{c}_ref"] for c in own})[suspect.columns]


def split_scores(scores: pd.DataFrame, text_score: str) -> dict[str, dict[str, np.ndarray]]:
    """Per statistic, its per-document values on the suspect (`test`) and reference (`extra`) sets (a
    statistic whose score the record lacks is left out)."""
    return {
        name: {
            s: scores.loc[scores["split"] == s, stat.column(text_score)].to_numpy() for s in ("test", "extra")
        }
        for name, stat in EXPOSURE_TESTS.items()
        if stat.column(text_score) in scores
    }


def exposure_test(
    suspect: pd.DataFrame,
    reference: pd.DataFrame | None,
    text_score: str = "loss",
    seed: int = 0,
    names: dict[str, str] | None = None,
    texts: list[str] | None = None,
) -> dict:
    """Every statistic for one model: per-doc scores (doc_scores) of the suspect (split `test`) and
    reference (split `extra`) documents under the suspect model and, when given, the reference model,
    whose own scores are the shift check. `names` says what the two sets are, for the verdict.

    `texts` (each document's text, in the rows' order) marks a reference that is not exchangeable with
    the suspect documents by design (a whole split, a file): the verdict then needs the reference check
    (contamination.shift) to find no shift, and to be able to find one, before it says SEEN."""
    scores = calibrate(suspect, reference)
    check_sizes(*(int((scores["split"] == s).sum()) for s in ("test", "extra")))
    out = {
        "calibrated": reference is not None,
        "text_score": text_score,
        "alpha": ALPHA,
        "names": names or {"test": "test", "extra": "extra"},
    }
    if reference is not None and texts is not None:
        base = {"text": reference["text"].to_numpy(), "Min-K%++": reference["mink"].to_numpy()}
        out["reference_check"] = reference_check(texts, base, (reference["split"] == "test").to_numpy(), seed)
    for name, values in split_scores(scores, text_score).items():
        out[name] = two_sample(values["test"], values["extra"], seed)
    if recorded_codec(suspect):  # CoDeC reads each model alone: the base's own is its false-positive check
        out[CODEC] = codec_test(suspect, seed)
        if reference is not None and recorded_codec(reference):
            out[f"{CODEC}_base"] = codec_test(reference, seed)
    if reference is not None:  # the shift check: the base's own scores, suspect against reference
        out["shift"] = {}
        for name, v in split_scores(reference, text_score).items():
            r = two_sample(v["test"], v["extra"], seed)
            out["shift"][name] = r | {"p_two_sided": two_sided(r)}
    return out


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
    for cond, df in scores.items():
        if recorded_codec(df):
            tests[cond][CODEC] = codec_test(df, seed)
    return {
        "text_score": text_score,
        "docs": ref[["split", "row", "label"]].to_dict("list"),
        "scores": {
            c: df[[x for x in SCORE_COLUMNS if x in df] + recorded_codec(df) + plugged(df)].to_dict("list")
            for c, df in scores.items()
        },
        "tests": tests,
    }


def plugged(df: pd.DataFrame) -> list[str]:
    """The plug-in scores' columns (any beyond the built-in ones), as the detectors read them."""
    return [c for c in df.columns if c not in BUILT_IN_COLUMNS]


def recorded_codec(df: pd.DataFrame) -> list[str]:
    """The CoDeC columns where it was run (a unit without it keeps the record it always had): the drops,
    and the blocks that shared a context where documents did."""
    if CODEC not in df or not df[CODEC].notna().all():
        return []
    return [CODEC, CODEC_BLOCK] if CODEC_BLOCK in df else [CODEC]


def codec_test(scores: pd.DataFrame, seed: int = 0) -> dict:
    """CoDeC's dataset score of each set (the share of its documents whose likelihood fell with the
    context) and the two-sample test of the drops, test against extra (H1: test's documents fell more).
    Where documents shared a context (CODEC_BLOCK), the test moves whole blocks (codec.block_test), and
    the document-level interval and detectable effect, which assume independent documents, are not given."""
    side = {s: scores["split"] == s for s in ("test", "extra")}
    drops = {s: scores.loc[rows, CODEC].to_numpy() for s, rows in side.items()}
    out = two_sample(drops["test"], drops["extra"], seed)
    if CODEC_BLOCK in scores:
        blocks = {s: scores.loc[rows, CODEC_BLOCK].to_numpy() for s, rows in side.items()}
        out |= codec.block_test(drops["test"], drops["extra"], blocks["test"], blocks["extra"], seed)
        out |= {"ci_low": float("nan"), "ci_high": float("nan"), "detectable": float("nan")}
    return out | {"share_test": codec.share(drops["test"]), "share_extra": codec.share(drops["extra"])}
