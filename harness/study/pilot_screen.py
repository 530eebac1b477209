"""The pilot's screen of a task, by a rule fixed before any bias is read (RULE): its base beats chance on
train's and extra's documents, and in the classifier flow its head learns (harness.study.pilot)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from harness import results
from harness.core.design import conditions
from harness.grid.configuration.config import GridConfig
from harness.study.screen import LEARNS, Screened

RULE = (
    "base beats chance on the train and extra documents of the pilot's units (binomial, one-sided); in the "
    f"classifier flow also, in most pilot units, its head's final training loss is below {LEARNS:g} x ln K "
    "and its test accuracy above the test subsample's majority share"
)


def screen_from_units(folder: Path, task: str) -> Screened:
    """The classifier flow's screen of a task: its base heads' answers on train and extra (the units
    recorded them), against always answering each split's most frequent class."""
    from scipy import stats

    docs = correct = majority = 0
    for unit in results.finished(folder / task).values():
        for split in unit["training"]["classify_base"]["screen"].values():
            docs, correct, majority = (
                docs + split["documents"],
                correct + split["correct"],
                majority + split["majority"],
            )
    chance = majority / docs
    p = float(stats.binomtest(correct, docs, chance, alternative="greater").pvalue)
    units = list(results.finished(folder / task).values())
    ratios = [head_loss_ratio(u) for u in units]
    learned = sum(r < LEARNS for r in ratios)
    above = sum(u[conditions.BASE] > u["majority"] + 1e-9 for u in units)
    most = len(units) // 2 + 1
    entered = p <= 0.05 and learned >= most and above >= most
    return Screened(
        task, docs, correct, chance, p, entered, len(units), learned, above, float(np.median(ratios))
    )


def head_loss_ratio(unit: dict) -> float:
    """The base head's final training loss over ln K (the loss of a uniform guess over the K classes):
    the mean over its last epoch's steps (one batch's loss alone is noise)."""
    log = unit["training"]["classify_base"]
    losses, epochs = log.get("losses") or [], (unit.get("settings") or {}).get("clf_epochs") or 3.0
    last = losses[-max(1, round(len(losses) / epochs)) :]
    k = unit.get("num_classes") or 2
    return float(np.mean(last)) / math.log(k) if last else float("inf")


def screen(cfg: GridConfig, folder: Path) -> list[Screened]:
    if cfg.grid.flow == "classifier":
        return [screen_from_units(folder, t) for t in cfg.slugs]
    from harness.study.screen import screen_task

    return [screen_task(cfg, t) for t in cfg.slugs]
