"""The classifier flow: fine-tune a classification head on train from the base LM, and from the LM the
method adapted on each condition's texts; the head, not a prompt, reads the classes."""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

import numpy as np

from harness.core.design import conditions, seeds
from harness.core.engine import models
from harness.core.plumbing.errors import SettingsError
from harness.core.plumbing.sections import Sections
from harness.grid.unit.flow import Flow, check_exposure_parts
from harness.grid.unit.unit_plan import UnitPlan
from harness.grid.unit.unit_record import (
    UnitRecord,
    exposure_docs,
    leak_strength,
    not_adapted,
    record_of,
    split_docs,
)
from harness.scoring import classifier
from harness.tasks.protocol import subsample_docs
from tapt import methods
from tapt.methods import raw_text
from tapt.methods.raw_text.pretrain import lm_head_is_new

log = logging.getLogger("tapt_bench.grid")


def check(cfg: Sections) -> None:
    """The zero-shot flow's keys, refused: a classifier reads raw text and predicts by its head."""
    if cfg.sample.prompt_format != "plain":
        problem = "renders the zero_shot flow's prompts; a classifier reads the raw text: remove it"
        raise SettingsError.of("prompt_format", problem)
    check_exposure_parts(cfg.grid, False)
    if cfg.grid.accuracy != "acc":
        problem = "reads the zero_shot flow's class log-probs; a classifier predicts by its head"
        raise SettingsError.of("accuracy", f"{problem}: remove it (got {cfg.grid.accuracy!r})")
    if conditions.STREAM in cfg.grid.conditions:
        problem = f"{conditions.STREAM} scores test in chunks zero-shot: it needs flow: zero_shot"
        raise SettingsError.of("conditions", problem)


def check_task(spec) -> str | None:
    if getattr(spec, "generative", False):
        return (
            "flow classifier trains a head that picks a class, and this task is generative (the model writes "
            "its answer); run it with flow: zero_shot"
        )
    if spec.classes is None:
        return (
            "flow classifier trains a head over fixed classes, and this task's choices differ "
            "from doc to doc; run it with flow: zero_shot"
        )
    return None


def compute(plan: UnitPlan, keep_adapters: bool = False) -> UnitRecord:
    """Fine-tune a classifier on train from the base LM, then from the LM the method adapted on extra's
    texts, then on test's (then, for leak, on test's texts with their class names). Nothing is kept."""
    docs, spec, k = plan.docs(), plan.spec, plan.key.k
    method = plan.adaptation()
    method_settings = plan.method_settings
    seed = plan.stream("classifier")  # the method's, the head's init, the training order
    head = plan.section("head")
    seconds, training, scored, exposed, skipped, gold = {}, {}, {}, {}, {}, {}
    start, fitted = starting_point(plan, head)
    if fitted:
        training["mlm_head"] = fitted
    for cond in plan.grid.conditions:
        clock = time.perf_counter()
        with tempfile.TemporaryDirectory() as work:
            backbone = start
            # adapted on the split's texts, never train's; labels only for the leak
            if cond != conditions.BASE:
                inputs = methods.Inputs(
                    None,
                    None,
                    spec,
                    split_docs(docs, cond),
                    method_settings,
                    seed,
                    Path(work),
                    model_dir=backbone,
                    leak_strength=leak_strength(plan, cond),
                )
                adapted = method.run(inputs)
                training[f"pretrain_{cond}"], backbone = adapted.record, adapted.model_dir
            if plan.grid.exposure or conditions.LEAK in plan.grid.conditions:
                # the backbone as TAPT left it, before the head is fine-tuned
                exposed[cond], gold[cond] = lm_scores(plan, docs, backbone)
            scored[cond], training[f"classify_{cond}"] = classifier.classify(
                backbone,
                docs["train"],
                docs["test"],
                len(spec.classes),
                head,
                plan.grid.eval_batch_size,
                seed,
                head_seed(head, plan.seed, k, cond),
                # the base's answers on train and extra (never test): the pilot's screen reads them
                {s: docs[s] for s in ("train", conditions.EXTRA)} if cond == conditions.BASE else None,
            )
        if cond != conditions.BASE:
            skipped[cond] = not_adapted(adapted.record, scored[cond], scored[conditions.BASE])
        seconds[cond] = time.perf_counter() - clock
        log.info("%s subsample %d: %s done (%.1f s)", spec.slug, k, cond, seconds[cond])
    exposed = {c: e for c, e in exposed.items() if e is not None}
    return record_of(plan, docs, scored, seconds, training, exposed, skipped, gold=gold)


def lm_scores(plan: UnitPlan, docs: dict, backbone: str):
    """The backbone's language-model scores, before a head is fine-tuned on it: the exposure test's of
    test and extra (None where it is off), and, where a leak is planted, the log p of each test document's
    gold class name at its slot (the leak's manipulation check)."""
    from contamination import doc_scores  # torch: imported where a model scores

    masked = not models.is_decoder(backbone)
    lm, tok = models.load_scoring_model(backbone, masked=masked)
    exposed = gold = None
    if plan.grid.exposure:
        exposed = doc_scores.raw_scores(
            lm, tok, exposure_docs(docs), masked, plan.stream("exposure"), plan.grid.eval_batch_size
        )
    if conditions.LEAK in plan.grid.conditions:
        gold = doc_scores.gold_log_probs(lm, tok, docs[conditions.TEST], masked, plan.grid.eval_batch_size)
    del lm
    return exposed, gold


def starting_point(plan: UnitPlan, head: classifier.ClassifierSettings) -> tuple[str, dict | None]:
    """Where every condition's backbone starts: the base, or (mlm_head fit, an encoder shipped without an
    MLM head) the base with its head fitted on pool rows that no split of any of the run's units draws."""
    base = models.resolve(plan.model.base)
    if head.mlm_head != "fit" or models.is_decoder(base) or not lm_head_is_new(base):
        return base, None
    from harness.tasks.data import load_pool
    from tapt.methods.raw_text import mlm_head

    pool = load_pool(plan.spec, plan.sample.data_dir)
    rows = unused_rows(plan.spec, plan.sample, len(pool), plan.grid.subsamples, head.mlm_head_rows)
    texts = pool["text"].iloc[rows].astype(str).tolist()
    folder, record = mlm_head.fitted(base, texts, rows, plan.seed, plan.spec.slug)
    return folder, record


def unused_rows(spec, sample, pool_size: int, subsamples: int, size: int) -> list[int]:
    """At most `size` pool rows, drawn from those that no split (train, extra, test, null) of subsamples 0
    .. `subsamples` - 1 draws (stream `mlm_head`): all of them where the pool leaves fewer (the fit
    records its count); an error naming mlm_head_rows where it leaves under MIN_FIT_ROWS."""
    drawn = set()
    for k in range(subsamples):
        drawn |= {int(r) for d in subsample_docs(spec, sample, k).values() for r in d["row"]}
    free = np.setdiff1d(np.arange(pool_size), sorted(drawn))
    if len(free) < MIN_FIT_ROWS:
        raise SettingsError.of(
            "mlm_head",
            f"is fit, and {spec.slug}'s pool leaves {len(free)} rows no unit draws (at least {MIN_FIT_ROWS} "
            "are needed): set mlm_head: new for it (task_overrides), or lower m, n or subsamples",
        )
    rng = np.random.default_rng(seeds.derive(sample.seed, 0, "mlm_head"))
    return sorted(int(r) for r in rng.permutation(free)[:size])


# the fewest free pool rows an MLM head is fitted on
MIN_FIT_ROWS = 32


def head_seed(head: classifier.ClassifierSettings, seed: int, k: int, cond: str) -> int:
    """The seed of a condition's head: the unit's classifier stream (tied), or one of the condition's own
    (per_condition)."""
    if head.head_seed == "tied":
        return seeds.derive(seed, k, "classifier")
    return seeds.head(seed, k, conditions.ALL.index(cond))


FLOW = Flow(
    name="classifier",
    sections={"head": (classifier.ClassifierSettings, "the classifier head")},  # the head's training
    default_method=raw_text.METHOD.name,
    check=check,
    check_task=check_task,
    check_base=lambda base: None,  # an encoder or a decoder: either takes a head
    compute=compute,
    null_model=None,
)
