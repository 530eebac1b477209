"""The conditions a unit scores and the effects compared between them: every module names them from here."""

from __future__ import annotations

BASE, EXTRA, TEST, LEAK = "base", "extra", "test", "leak"
PAIRED = (BASE, EXTRA, TEST)  # the study's three conditions; every unit scores them
ALL = (*PAIRED, LEAK)  # with the planted leak: TAPT on test's prompts with their answers (a positive control)
# each TAPT condition: (the split it trains on, with its answers?)
TAPT = {EXTRA: (EXTRA, False), TEST: (TEST, False), LEAK: (TEST, True)}
TAPT_SPLITS = (EXTRA, TEST)  # TAPT never trains on the labeled train split
# (control, treatment) of each effect: the pretraining boost, the evaluation bias, the planted leak
EFFECTS = {"boost": (BASE, EXTRA), "bias": (EXTRA, TEST), "leak": (EXTRA, LEAK)}
