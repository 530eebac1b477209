"""The conditions a unit scores and the effects compared between them: every module names them from here."""

from __future__ import annotations

BASE, EXTRA, TEST, LEAK, STREAM = "base", "extra", "test", "leak", "stream"
# calibrate's null model: TAPT on a third disjoint draw of the pool (neither test nor extra), the model a
# detector's false positives are read on; a split of its own, not a grid condition
NULL = "null"
PAIRED = (BASE, EXTRA, TEST)  # the study's three conditions; every unit scores them
# with the planted leak (TAPT on test's prompts with their answers: a positive control) and the score-first
# stream (test cut into chunks, each scored by the method adapted on the chunks before it, never on itself)
ALL = (*PAIRED, LEAK, STREAM)
# each TAPT condition: (the split it trains on, with its answers?)
TAPT = {
    EXTRA: (EXTRA, False),
    TEST: (TEST, False),
    LEAK: (TEST, True),
    STREAM: (TEST, False),
    NULL: (NULL, False),
}
TAPT_SPLITS = (EXTRA, TEST)  # TAPT never trains on the labeled train split
# (control, treatment) of each effect: the pretraining boost, the evaluation bias, the planted leak
# and what legitimate online adaptation gains (score-first, as test-time training must be run to be fair)
BOOST, BIAS, PLANTED, ONLINE = "boost", "bias", "leak", "online"  # the effects' names, each written once
EFFECTS = {BOOST: (BASE, EXTRA), BIAS: (EXTRA, TEST), PLANTED: (EXTRA, LEAK), ONLINE: (EXTRA, STREAM)}
TESTED = (BIAS, PLANTED)  # given a paired permutation test, BH over tasks
# the effects whose question has one side whatever a plan says: a planted leak is asked whether it raised
# the score above extra's (its test is one-sided, H1: leak above extra); the bias keeps its plan's sides
ONE_SIDED = (PLANTED,)
PRIMARY = BIAS  # the design's question: the effect whose detectable size (MDE) is reported
READ_TEST = tuple(e for e, (_, t) in EFFECTS.items() if TAPT.get(t, ("",))[0] == TEST)  # bias, leak, online
OPTIONAL = tuple(c for c in ALL if c not in PAIRED)  # conditions a run may add to the paired three
STUDIED = (BOOST, PRIMARY)  # the study's two effects: what `analyze` fits unless told one


def shown() -> tuple[str, ...]:
    """The effects in the order the report and the plots show them: the primary, the other tested ones
    (shown even where a run lacks them: a missing positive control is news), then the rest."""
    return (PRIMARY, *(e for e in TESTED if e != PRIMARY), *(e for e in EFFECTS if e not in TESTED))


def label(effect: str, sep: str = "-") -> str:
    """An effect as the tables name it: `bias (test-extra)`."""
    control, treatment = EFFECTS[effect]
    return f"{effect} ({treatment}{sep}{control})"
