"""What every step of one zero-shot unit reads, fixed for the unit (`ZeroShot`), and the steps that score:
lm-eval's scores of test, the exposure test's scores of test and extra, and the base's scores kept for
the other methods' units of the same documents (harness/grid/unit/flows/zero_shot.py runs them)."""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from contamination import doc_scores
from harness.core.design import conditions
from harness.core.engine import adapters
from harness.core.plumbing.settings import Settings
from harness.grid.unit.base_model import BASE_SCORES, Base, loaded_base
from harness.grid.unit.unit_plan import UnitPlan
from harness.grid.unit.unit_record import Step, exposure_docs, leak_strength, split_docs
from harness.scoring import zero_shot as scoring
from harness.tasks.protocol import Spec
from tapt import methods

log = logging.getLogger("tapt_bench.grid")


@dataclass(frozen=True)
class ZeroShot:
    """What every step of one zero-shot unit reads, fixed for the unit: its plan, its documents, the
    method and its settings, the loaded base and its lm-eval task."""

    plan: UnitPlan
    docs: dict
    method: methods.Method
    settings: Settings
    base: Base
    task: scoring.EvalTask
    keep_adapters: bool

    @property
    def spec(self) -> Spec:
        return self.plan.spec

    @property
    def k(self) -> int:
        return self.plan.key.k

    def inputs(self, cond: str, workdir: Path) -> methods.Inputs:
        """What the method adapts on in condition `cond`: the loaded base, the condition's documents (the
        gold labels only for the leak), the unit's settings and seed, its scratch folder."""
        return methods.Inputs(
            self.base.model,
            self.base.tokenizer,
            self.spec,
            split_docs(self.docs, cond),
            self.settings,
            self.plan.stream("adapt"),
            workdir,
            leak_strength=leak_strength(self.plan, cond),
        )


def unit_inputs(plan: UnitPlan, docs: dict, keep_adapters: bool) -> ZeroShot:
    """What every step of the unit reads: its plan, its method, its lm-eval task of test, the loaded base."""
    metadata = {**dataclasses.asdict(plan.sample), "subsample": plan.key.k, "split": conditions.TEST}
    task = scoring.lm_eval_task(plan.spec, metadata, plan.sample.include_path, docs[conditions.TEST])
    method = plan.adaptation()
    base = loaded_base(plan.model, plan.section("form"))
    return ZeroShot(plan, docs, method, plan.method_settings, base, task, keep_adapters)


def timed(u: ZeroShot, name: str, work):
    """(what `work()` returns, {name: its seconds}), logged as the stage's line."""
    clock = time.perf_counter()
    out = work()
    took = time.perf_counter() - clock
    log.info("%s subsample %d: %s done (%.1f s)", u.spec.slug, u.k, name, took)
    return out, {name: took}


def score(u: ZeroShot, cond: str, model, lm=None, name: str | None = None) -> Step:
    """lm-eval's scores of test under `model` (as `name`, one of the models `lm` scores together); with the
    exposure test, its scores of test and extra, both splits in one pass of their own (one code path for the
    two sides the test compares)."""
    grid = u.plan.grid
    lm = lm or scoring.scorer(model, u.base.tokenizer, grid.eval_batch_size)
    scored, seconds = timed(u, f"score_{cond}", lambda: scoring.score(lm, u.task, grid.accuracy, name))
    exposed = gold = None
    with adapters.active(model, name):
        if conditions.LEAK in grid.conditions and cond in conditions.ALL:  # the leak's manipulation check
            gold, more = timed(u, f"gold_{cond}", lambda: gold_log_probs(u, model))
            seconds |= more
        if grid.exposure:
            exposed, more = timed(u, f"exposure_{cond}", lambda: exposure(u, model))
            seconds |= more
    return Step(scored, exposed, seconds=seconds, gold=gold)


def gold_log_probs(u: ZeroShot, model) -> list[float]:
    """Log p of each test document's gold continuation after its prompt, under `model`."""
    docs = u.docs[conditions.TEST]
    return doc_scores.prompt_gold_log_probs(
        model, u.base.tokenizer, u.spec, docs, u.plan.grid.eval_batch_size
    )


def exposure(u: ZeroShot, model) -> pd.DataFrame:
    """The exposure test's scores of test and extra under `model`, plug-in scores loaded by name here."""
    from contamination.detectors import load_score

    grid = u.plan.grid
    return doc_scores.prompt_scores(
        model,
        u.base.tokenizer,
        u.spec,
        exposure_docs(u.docs),
        grid.eval_batch_size,
        codec_context=grid.codec_context,
        codec_block=grid.codec_block,
        seed=u.plan.stream("exposure"),
        extra=[(load_score(target), settings) for target, settings in grid.scores.items()],
    )


def found_base(u: ZeroShot) -> tuple[Step | None, str | None]:
    """The base's scores and the model folder that computed them, where another method's unit of the same
    documents and base settings did (scoring is deterministic: the same numbers); (None, None) if none."""
    found = BASE_SCORES.of_another(base_key(u), u.plan.tag)
    if found is None:
        return None, None
    tag, scored, exposed = found
    return Step(scored[conditions.BASE], exposed.get(conditions.BASE)), tag


def kept_base(u: ZeroShot, step: Step) -> Step:
    """The base's step, kept for the other methods' units of the same documents."""
    exposed = {} if step.exposed is None else {conditions.BASE: step.exposed}
    BASE_SCORES.keep(base_key(u), u.plan.tag, {conditions.BASE: step.scored}, exposed)
    return step


def base_key(u: ZeroShot) -> tuple:
    """What the base's scores are kept under: the results root, the base's settings, the task, the draw."""
    return (u.plan.grid.out, u.plan.base_hash, u.spec.slug, u.k)
