"""Every membership detector as a p-value read from a grid unit's exposure record, with what a flag
claims the model saw of the test split, and their error rates on models of known exposure.

A unit's record holds every test and extra document's scores under each condition's model (base,
extra, test, leak); which of those models saw the test split's text (test, leak) and its labels (leak)
is known by design (conditions.TAPT), so a detector's flag rate on the others is its false-positive
rate and on those its power. Each detector is a two-sample test of test against extra documents:
- `exposure text` / `exposure label`: the exposure test (calibrated by base);
- `exposure label (twin)`: the label statistic of each model on the text it saw (exposure.twin_label_test);
- `exposure confidence`: the gain over base of the model's confidence in its own top choice, test against
  extra documents: adaptation on the model's own answers to a split (self-training, test-time RL);
- `exposure label (verdict)`: the single-checkpoint verdict's labels SEEN: the margin, where neither side's
  text was seen (the verdict reads a label flag beside a text flag as "text or labels");
- `loss` / `Min-K%++` (uncalibrated): the suspect's own scores, no base subtracted;
- `zlib ratio`: log-perplexity over the zlib-compressed length of the text (Carlini et al. 2021), negated
  so that higher reads as member-like;
- `CoDeC`: the drop of each document's likelihood when documents of its own set stand before it
  (Zawalski et al. 2025; contamination.codec), test's drops against extra's; only in units whose grid
  ran it (`codec_context`).
A new detector is one call: `built_in(name, sees, pvalue)` in this file for a built-in, registered where it
is defined; in a plug-in's own file, `harness.api.register(Detector(sees, pvalue, name=...))` (the file named
by `calibrate --detectors FILE.py` or `FILE.py:NAME`, or installed as an entry point of the group
`tapt_bench.detectors` naming a module that registers on import).
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from contamination.doc_scores import Score
from contamination.exposure import BUILT_IN_COLUMNS, two_sample
from harness.core.design import conditions
from harness.core.design.power import ALPHA, clustered_wilson, wilson
from harness.core.plumbing.plugins import PluginError, Registry, called, real

TEXT, LABELS = "text", "labels"


@dataclass(frozen=True)
class Detector:
    """`pvalue(record, condition, texts)`: the one-sided p-value that the test documents were seen by the
    condition's model (None where the detector does not apply to it); `sees`: what a flag claims."""

    sees: str
    pvalue: Callable[[dict, str, list[str]], float | None]
    name: str = ""  # its name in DETECTORS (register sets it)


def saw(cond: str, what: str) -> bool:
    """Whether the condition's model saw the test split's text, or its labels (by design)."""
    split, answers = conditions.TAPT.get(cond, (None, False))
    return split == conditions.TEST and (what == TEXT or answers)


def recorded(statistic: str) -> Callable[[dict, str, list[str]], float | None]:
    """A statistic the unit's exposure test already computed against base (base itself: not applicable)."""

    def pvalue(record: dict, cond: str, texts: list[str]) -> float | None:
        test = record["tests"][cond]
        return test[statistic]["p_test"] if test["calibrated"] and statistic in test else None

    return pvalue


def label_verdict(record: dict, cond: str, texts: list[str]) -> float | None:
    """What `contamination exposure` on one checkpoint says of the labels: the margin's p-value where the
    verdict reads it as labels SEEN, 1 where a text flag on either side makes it 'text or labels' or
    inconclusive (the verdict then claims no labels)."""
    test = record["tests"][cond]
    if not test["calibrated"]:
        return None
    a = test["alpha"]
    text_seen = test["text"]["p_test"] <= a or test["text"]["p_extra"] <= a
    return 1.0 if text_seen else test["label"]["p_test"]


def uncalibrated(score: Callable[[pd.DataFrame, list[str]], np.ndarray]) -> Callable:
    """A per-document score of the condition's model alone, test documents against extra documents."""

    def pvalue(record: dict, cond: str, texts: list[str]) -> float:
        scores = pd.DataFrame(record["scores"][cond]).assign(split=record["docs"]["split"])
        values = np.asarray(score(scores, texts), float)
        on = scores["split"].to_numpy()
        return two_sample(values[on == conditions.TEST], values[on == conditions.EXTRA])["p_test"]

    return pvalue


def recorded_score(name: str) -> Callable:
    """A plug-in score's two-sample test (uncalibrated), where the unit recorded its column."""
    test = uncalibrated(lambda s, _: s[name])

    def pvalue(record: dict, cond: str, texts: list[str]) -> float | None:
        return test(record, cond, texts) if name in record["scores"][cond] else None

    return pvalue


def zlib_ratio(scores: pd.DataFrame, texts: list[str]) -> np.ndarray:
    """Minus log-perplexity (the `text` score) over the zlib entropy of the text, in bytes."""
    zipped = np.array([len(zlib.compress(t.encode())) for t in texts], float)
    return scores["text"].to_numpy() / zipped


def codec_pvalue(record: dict, cond: str, texts: list[str]) -> float | None:
    """CoDeC's test of the condition's model, where the unit recorded it."""
    test = record["tests"][cond].get("codec")
    return None if test is None else test["p_test"]


def checked(detector: Detector) -> None:
    """A detector's own fields: a name, and what it sees."""
    if not detector.name or detector.sees not in (TEXT, LABELS):
        raise PluginError(
            f"detector {detector.name or detector!r} must be a Detector with a name, whose sees is "
            f"{TEXT!r} or {LABELS!r}"
        )


# the detectors by name: the built-ins, registered where they are defined below, then the plug-ins
DETECTORS: Registry[Detector] = Registry("detector", Detector, key=lambda d: d.name, validate=checked)


def built_in(name: str, sees: str, pvalue: Callable[[dict, str, list[str]], float | None]) -> Detector:
    """A built-in detector, registered where it is defined, as a plug-in's file registers its own (before
    any installed plug-in is read: a built-in's name is never taken)."""
    return DETECTORS.register(Detector(sees, pvalue, name))


built_in("exposure text", TEXT, recorded("text"))
built_in("exposure label", LABELS, recorded("label"))
built_in("exposure label (twin)", LABELS, recorded("label_twin"))
built_in("exposure confidence", TEXT, recorded("confidence"))
built_in("exposure label (verdict)", LABELS, label_verdict)
built_in("loss (uncalibrated)", TEXT, uncalibrated(lambda s, _: s["text"]))
built_in("Min-K%++ (uncalibrated)", TEXT, uncalibrated(lambda s, _: s["mink"]))
built_in("zlib ratio", TEXT, uncalibrated(zlib_ratio))
built_in("CoDeC", TEXT, codec_pvalue)
UNIT = ("task", "subsample")  # the p-values of one unit's models: they share its documents
_SCORES: dict[str, Score] = {}  # plug-in scores by the target that named them, each loaded once


def own_name(value: Score, target: str) -> None:
    if value.name in BUILT_IN_COLUMNS:
        raise PluginError(f"{target!r}: its name {value.name!r} is a built-in score's; choose another")


# the plug-in per-document scores (the built-ins are doc_scores' own columns)
SCORES: Registry[Score] = Registry("score", Score, check=own_name)


def load_score(target: str) -> Score:
    """A plug-in per-document score named `path/to/file.py:attr` or `module:attr` (SCORES.find), with its
    detector registered under the score's name. Raises a PluginError (a ValueError) with what to fix."""
    if target in _SCORES:
        return _SCORES[target]
    value = SCORES.find(target)
    register(value.name, value.detector or Detector(value.sees, recorded_score(value.name)))
    _SCORES[target] = value
    return value


def register(name: str, detector: Detector) -> Detector:
    """Add a detector under `name` (refused if the name is taken by another); returns it."""
    if not isinstance(detector, Detector):
        raise PluginError(f"detector {name!r} must be a Detector whose sees is {TEXT!r} or {LABELS!r}")
    named = detector if detector.name == name else dataclasses.replace(detector, name=name)
    found = DETECTORS.held(name)
    if found is not None and found == named:  # the same file loaded again (a second --detectors): kept
        return found
    return DETECTORS.register(named)


def load_installed() -> list[str]:
    """The installed detector plug-ins (entry points of `tapt_bench.detectors`), imported; their names."""
    return list(DETECTORS)


def unit_pvalues(record: dict, texts: list[str]) -> list[dict]:
    """Every detector's p-value for every condition of one unit's exposure record."""
    rows = []
    for name, det in DETECTORS.items():
        for cond in record["tests"]:
            p = called("detector", name, det.pvalue, record, cond, texts)
            if p is not None:
                p = real("detector", name, det.pvalue, p, 0.0, 1.0)  # a p-value
                rows.append({"detector": name, "condition": cond, "p": p})
    return rows


def rate(flags: pd.Series, units: pd.Series) -> dict:
    """A flag rate with its Wilson interval (models as independent) and the interval by unit (the models
    of one unit share its documents: harness.core.design.power.clustered_wilson)."""
    flagged, total = int(flags.sum()), len(flags)
    low, high = wilson(flagged, total)
    unit_low, unit_high = clustered_wilson(flags.to_numpy(), units.tolist())
    return {
        "flagged": flagged,
        "models": total,
        "units": int(units.nunique()),
        "rate": flagged / total if total else float("nan"),
        "low": low,
        "high": high,
        "unit_low": unit_low,
        "unit_high": unit_high,
    }


def error_rates(
    pvalues: pd.DataFrame,
    sees: dict[str, str],
    by: tuple[str, ...] = ("mode", "detector"),
    alpha: float = ALPHA,
) -> list[dict]:
    """Per group of `by` (a detector within a mode, say): its flag rate on the grid's models that did not
    see what the detector claims to see (false positives), on those that did (power), and on calibrate's
    null models (`null`, where there are any), with 95% Wilson intervals, and per condition."""
    keys = list(by)
    out = []
    for group, df in pvalues.groupby(keys, sort=False):
        row = dict(zip(keys, group if isinstance(group, tuple) else (group,)))
        truth = df["condition"].map(lambda c, what=sees[row["detector"]]: saw(c, what))
        flagged = df["p"] <= alpha
        unit_keys = [c for c in UNIT if c in df]
        units = df[unit_keys].astype(str).agg("/".join, axis=1) if unit_keys else df.index.to_series()
        row["sees"] = sees[row["detector"]]
        grid = df["condition"] != conditions.NULL  # the grid's own models; calibrate's null models apart
        row["false_positive"] = rate(flagged[~truth & grid], units[~truth & grid])
        row["power"] = rate(flagged[truth], units[truth])
        where = {c: df["condition"] == c for c in df["condition"].unique()}
        row["by_condition"] = {c: rate(flagged[rows], units[rows]) for c, rows in where.items()}
        if conditions.NULL in where:  # the models that saw neither side: calibrate's null models
            row["null"] = row["by_condition"][conditions.NULL]
        out.append(row)
    return out


def format_rates(rates: list[dict], alpha: float = ALPHA) -> str:
    """The error-rate table: one line per group (method, mode, task where grouped by them) and detector."""
    task = any("task" in r for r in rates)
    null = any("null" in r for r in rates)
    width = max([len(r.get("method", "")) for r in rates] + [6])
    lines = [
        f"detector error rates at alpha {alpha} on models of known exposure (flagged/models, rate "
        "[95% Wilson interval, models as independent] [95% interval by unit: a unit's models share its "
        "documents]); false positives: models that did not see what the detector claims to see; power: "
        "models that did"
        + ("; null: the null models alone (adapted on a third draw, neither test nor extra)" if null else ""),
        f"  {'method':{width}} {'mode':8} "
        + (f"{'task':16} " if task else "")
        + f"{'detector':24} {'sees':6} {'false positives':>45} {'power':>45}"
        + (f" {'null':>45}" if null else ""),
    ]
    empty = {"models": 0}
    for r in rates:
        cells = [
            f"{c['flagged']:>3}/{c['models']:<3} {c['rate']:5.1%} [{c['low']:5.1%}, {c['high']:5.1%}] "
            f"[{c['unit_low']:5.1%}, {c['unit_high']:5.1%}]"
            if c["models"]
            else f"{'-':>45}"
            for c in (r["false_positive"], r["power"], r.get("null", empty))
        ]
        lines.append(
            f"  {r.get('method', ''):{width}} {r.get('mode', ''):8} "
            + (f"{r.get('task', ''):16} " if task else "")
            + f"{r['detector']:24} {r['sees']:6} {cells[0]:>45} {cells[1]:>45}"
            + (f" {cells[2]:>45}" if null else "")
        )
    return "\n".join(lines)
