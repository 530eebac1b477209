"""Is a reference like the suspect documents? The check a whole-split exposure verdict needs before it
may say SEEN.

Calibrating by the base removes each text's difficulty, not an adapter's learned preference for the
distribution it was trained on: a reference that is rewritten (a prefix, lowercased, stripped of
punctuation) or drawn from elsewhere gains less from any adapter of the task than the task's own
unseen documents do, and reads as exposure. The base's mean scores alone miss such shifts at small n.
So the check reads several per-document features at once: the base's text scores and the text's own
surface (length, the shares of capitals, punctuation, digits, non-ASCII characters and spaces, and the
longest prefix and suffix a document shares with another one), each as a standardised rank-sum
statistic, and tests their largest absolute value by permuting the two sets (exactly where the
splits are few): one p-value that holds its level over all features. Written here because scipy's
permutation_test takes one statistic per call, and the maximum over features needs the joint draw.
"""

from __future__ import annotations

import os.path
import string
from itertools import combinations
from math import comb

import numpy as np

from harness.core.design.power import ALPHA, RESAMPLES

EXACT_UP_TO = 20000  # splits enumerated exactly up to this many; sampled beyond
PUNCTUATION = set(string.punctuation)


def longest_shared(texts: list[str], suffix: bool = False) -> np.ndarray:
    """Per text, the longest prefix (or suffix) in characters it shares with any other text."""
    keys = [t[::-1] if suffix else t for t in texts]
    order = sorted(range(len(keys)), key=keys.__getitem__)  # a shared prefix is longest with a neighbour
    out = np.zeros(len(keys))
    for a, b in zip(order, order[1:]):
        n = len(os.path.commonprefix([keys[a], keys[b]]))
        out[a], out[b] = max(out[a], n), max(out[b], n)
    return out


def surface(texts: list[str]) -> dict[str, np.ndarray]:
    """Features of the texts alone."""

    def share(t: str, test) -> float:
        return sum(map(test, t)) / max(len(t), 1)

    letters = [[c for c in t if c.isalpha()] for t in texts]
    return {
        "length": np.log1p([len(t) for t in texts]),
        "capitals": np.array([sum(c.isupper() for c in x) / max(len(x), 1) for x in letters]),
        "punctuation": np.array([share(t, PUNCTUATION.__contains__) for t in texts]),
        "digits": np.array([share(t, str.isdigit) for t in texts]),
        "non-ASCII": np.array([share(t, lambda c: ord(c) > 127) for t in texts]),
        "spaces": np.array([share(t, str.isspace) for t in texts]),
        "shared prefix": np.log1p(longest_shared(texts)),
        "shared suffix": np.log1p(longest_shared(texts, suffix=True)),
    }


def smallest_pvalue(n_suspect: int, n_reference: int) -> float:
    """The smallest p-value the two-sided check can give with these set sizes."""
    return min(1.0, 2 / comb(n_suspect + n_reference, n_suspect))


def splits(n: int, k: int, seed: int) -> np.ndarray:
    """Boolean masks of the first set: every split of n into k (if few), else random ones, the observed
    split (the first k) included as the first row."""
    if comb(n, k) <= EXACT_UP_TO:
        masks = np.zeros((comb(n, k), n), bool)
        for i, chosen in enumerate(combinations(range(n), k)):
            masks[i, list(chosen)] = True
        return masks
    rng = np.random.default_rng(seed)
    masks = np.zeros((RESAMPLES + 1, n), bool)
    masks[0, :k] = True
    for i in range(1, RESAMPLES + 1):
        masks[i, rng.choice(n, k, replace=False)] = True
    return masks


def shift_test(features: dict[str, np.ndarray], suspect: np.ndarray, seed: int = 0) -> dict:
    """The two-sided permutation test of the largest standardised rank-sum over the features
    (`suspect`: which documents are suspect, the rest the reference). Features without spread are
    skipped. Returns the p-value, each feature's |z| and the feature that separates the sets most."""
    from scipy import stats

    suspect = np.asarray(suspect, bool)
    n, k = len(suspect), int(suspect.sum())
    order = np.concatenate([np.flatnonzero(suspect), np.flatnonzero(~suspect)])  # observed split first
    names = [f for f, v in features.items() if np.ptp(v) > 0]
    if not names:
        return {"p": 1.0, "z": {}, "most": None, "smallest_p": smallest_pvalue(k, n - k)}
    ranks = np.column_stack([stats.rankdata(np.asarray(features[f], float)[order]) for f in names])
    mean = k * (n + 1) / 2
    sd = np.sqrt(k * (n - k) / n * ranks.var(axis=0) * n / (n - 1))  # the rank sum's spread, ties included
    masks = splits(n, k, seed)
    z = np.abs(masks.astype(float) @ ranks - mean) / sd
    largest = z.max(axis=1)
    observed = largest[0] if comb(n, k) > EXACT_UP_TO else largest[np.all(masks[:, :k], axis=1)][0]
    p = float(np.mean(largest >= observed - 1e-9))
    zs = dict(zip(names, np.abs(ranks[:k].sum(0) - mean) / sd))
    return {
        "p": p,
        "z": {f: float(v) for f, v in zs.items()},
        "most": max(zs, key=zs.get),
        "smallest_p": smallest_pvalue(k, n - k),
    }


def reference_check(texts: list[str], base_scores: dict[str, np.ndarray], suspect: np.ndarray, seed: int = 0):
    """The check of a whole-split reference: the base's scores and the texts' surface, suspect against
    reference, with whether it can reach alpha at all and whether it found a shift."""
    features = {f"base {name}": np.asarray(v, float) for name, v in base_scores.items()} | surface(texts)
    out = shift_test(features, suspect, seed)
    return out | {"can_reject": out["smallest_p"] <= ALPHA, "shifted": out["p"] <= ALPHA}
