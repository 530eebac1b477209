"""One (task, subsample) unit of the grid, computed in one pass down the layers: the task and its
subsample are loaded once, each stage gets its own settings and the objects it needs.

Two flows: zero_shot (prompt adapters, scored zero-shot through lm-eval) and classifier (raw text
pretraining, then a classification head fine-tuned on train)."""

from __future__ import annotations

import dataclasses
import logging
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from contamination import doc_scores
from harness.core import conditions, models, weights
from harness.core.errors import UserError
from harness.core.settings import Settings
from harness.grid import stream
from harness.grid.base_model import BASE_SCORES, LOADED, Base, loaded_base
from harness.grid.config import GridConfig
from harness.grid.plan import Planned
from harness.grid.unit_record import Unit, exposure_docs, not_adapted, split_docs, unit_of
from harness.scoring import classifier, zero_shot
from harness.tasks.protocol import Spec, find_spec, subsample_docs
from tapt import methods, output

log = logging.getLogger("tapt_bench.grid")


def compute_unit(unit: Planned, keep_adapters: bool = False) -> Unit:
    """Compute one unit of the plan, of either flow; nothing is written but kept adapters."""
    spec = find_spec(unit.slug, unit.config.include_path)
    docs = subsample_docs(spec, unit.config.sample, unit.k)
    if unit.config.flow == "classifier":
        return classifier_unit(unit, spec, docs)
    try:
        return zero_shot_unit(unit, spec, docs, keep_adapters)
    except BaseException:
        LOADED.forget()  # a unit that failed mid-way may leave its adapter in the base: never reuse that
        raise


def null_model(unit: Planned, base_scored: pd.DataFrame) -> Step:
    """The unit's method adapted on the subsample's third draw (neither test nor extra) and scored as
    every condition is: the model on which `contamination calibrate` reads each detector's false positives
    (zero-shot flow). `base_scored`: the base's lm-eval scores of test, as the unit recorded them (read,
    not computed again: scoring is deterministic), against which a model that did not move is told."""
    cfg = unit.config
    spec = find_spec(unit.slug, cfg.include_path)
    docs = subsample_docs(spec, cfg.sample, unit.k)
    if len(docs[conditions.NULL]) < cfg.n:
        raise UserError(
            f"{spec.slug}: the null model needs a third draw of n = {cfg.n} documents beside train, extra "
            f"and test, and the pool leaves {len(docs[conditions.NULL])}: lower n, or pass --no-null-model"
        )
    try:
        u = unit_inputs(unit, spec, docs, keep_adapters=False)
        order = base_scored.set_index("row").loc[docs[conditions.TEST]["row"]].reset_index()
        return condition_step(u, conditions.NULL, Step(order))
    except BaseException:
        LOADED.forget()
        raise


@dataclass(frozen=True)
class ZeroShot:
    """What every step of one zero-shot unit reads, fixed for the unit: its plan, its documents, the
    loaded base and its lm-eval task."""

    unit: Planned
    spec: Spec
    docs: dict
    base: Base
    task: zero_shot.EvalTask
    keep_adapters: bool

    @property
    def cfg(self) -> GridConfig:  # the unit's keys (the task's overrides applied): values only
        return self.unit.config

    @property
    def k(self) -> int:
        return self.unit.k

    @property
    def method(self) -> methods.Method:
        return self.unit.cell.method

    @property
    def settings(self) -> Settings:
        return self.unit.settings


@dataclass
class Step:
    """One condition's outcome: lm-eval's scores of test, the exposure test's record, the method's record,
    why its model is not an adaptation (None where it is), and the seconds of each stage."""

    scored: pd.DataFrame
    exposed: pd.DataFrame | None = None
    training: dict | None = None
    skipped: str | None = None
    seconds: dict = field(default_factory=dict)


def zero_shot_unit(unit: Planned, spec: Spec, docs: dict, keep_adapters: bool) -> Unit:
    """Score base, then adapt (the unit's method) and score once per condition, restoring the base
    after each: a step per condition, each returning its outcome."""
    u = unit_inputs(unit, spec, docs, keep_adapters)
    cfg = unit.config
    base, base_from = base_step(u)
    steps = {conditions.BASE: base}
    for cond in cfg.conditions[1:]:  # extra, test (and leak, stream): each adapts on its split's documents
        steps[cond] = (stream_step if cond == conditions.STREAM else condition_step)(u, cond, base)
    done = unit_of(
        unit,
        spec,
        docs,
        {c: s.scored for c, s in steps.items()},
        {name: t for s in steps.values() for name, t in s.seconds.items()},
        {c: s.training for c, s in steps.items() if s.training is not None},
        {c: s.exposed for c, s in steps.items() if s.exposed is not None},
        {c: s.skipped for c, s in steps.items() if c != conditions.BASE},
    )
    if base_from:
        done.record["base_from"] = base_from
    return done


def unit_inputs(unit: Planned, spec: Spec, docs: dict, keep_adapters: bool) -> ZeroShot:
    """What every step of the unit reads: its plan, its lm-eval task of test, the loaded base."""
    cfg = unit.config
    metadata = {**dataclasses.asdict(cfg.sample), "subsample": unit.k, "split": conditions.TEST}
    task = zero_shot.lm_eval_task(spec, metadata, cfg.include_path, docs[conditions.TEST])
    return ZeroShot(unit, spec, docs, loaded_base(cfg), task, keep_adapters)


def timed(u: ZeroShot, name: str, work):
    """(what `work()` returns, {name: its seconds}), logged as the stage's line."""
    clock = time.perf_counter()
    out = work()
    took = time.perf_counter() - clock
    log.info("%s subsample %d: %s done (%.1f s)", u.spec.slug, u.k, name, took)
    return out, {name: took}


def score(u: ZeroShot, cond: str, model) -> Step:
    """lm-eval's scores of test under `model`; with the exposure test, its scores of test and extra, both
    splits in one pass of their own (one code path for the two sides the test compares)."""
    lm = zero_shot.scorer(model, u.base.tokenizer, u.cfg.eval_batch_size)
    scored, seconds = timed(u, f"score_{cond}", lambda: zero_shot.score(lm, u.task, u.cfg.accuracy))
    if not u.cfg.exposure:
        return Step(scored, seconds=seconds)
    exposed, more = timed(
        u,
        f"exposure_{cond}",
        lambda: doc_scores.prompt_scores(
            model,
            u.base.tokenizer,
            u.spec,
            exposure_docs(u.docs),
            u.cfg.eval_batch_size,
            codec_context=u.cfg.codec_context,
            codec_block=u.cfg.codec_block,
            seed=u.cfg.seed,
            extra=list(u.unit.cell.scores),
        ),
    )
    return Step(scored, exposed, seconds=seconds | more)


def base_step(u: ZeroShot) -> tuple[Step, str | None]:
    """The base's scores, and the model folder that computed them where another method's unit of the same
    documents and base settings did (scoring is deterministic: the same numbers)."""
    key = (u.cfg.out, u.unit.cell.base_hash, u.spec.slug, u.k)
    found = BASE_SCORES.of_another(key, u.unit.cell.tag)
    if found is not None:
        tag, scored, exposed = found
        return Step(scored[conditions.BASE], exposed.get(conditions.BASE)), tag
    step = score(u, conditions.BASE, u.base.model)
    exposed = {} if step.exposed is None else {conditions.BASE: step.exposed}
    BASE_SCORES.keep(key, u.unit.cell.tag, {conditions.BASE: step.scored}, exposed)
    return step, None


def condition_step(u: ZeroShot, cond: str, base: Step) -> Step:
    """Adapt the base on the condition's split (the method's run), score it, and take the base back."""
    split, answers = conditions.TAPT[cond]

    def adapt():
        with tempfile.TemporaryDirectory() as work:  # the method's scratch dir
            x = methods.Inputs(
                u.base.model,
                u.base.tokenizer,
                u.spec,
                split_docs(u.docs, cond),
                u.settings,
                u.cfg.seed,
                Path(work),
            )
            adapted = u.method.run(x, u.base.at_load, cond)
        u.base.check_tokenizer(u.method, cond)
        rec = {**dataclasses.asdict(u.settings), "split": split, "answers": answers, **adapted.record}
        prompt = {"prompt_format": u.cfg.sample.prompt_format, "accuracy": u.cfg.accuracy}  # how it was read
        rec["adapter_sha256"] = weights.adapter_sha256(
            adapted.model
        )  # which adapter scored it (None: no PEFT)
        rec |= methods.vote_agreement(adapted.record, u.docs[split])  # made-up labels against the gold ones
        if u.keep_adapters and hasattr(adapted.model, "save_pretrained"):
            with output.staged(u.unit.folder / "adapters" / f"{u.k}_{cond}", overwrite=True) as tmp:
                adapted.model.save_pretrained(tmp)
                output.write_record(
                    tmp, {"kind": "adapter", "task": u.spec.slug, "subsample": u.k, **rec, **prompt}
                )
        return adapted, {key: v for key, v in rec.items() if key != "rows"}

    (adapted, training), seconds = timed(u, f"train_{cond}", adapt)
    step = score(u, cond, adapted.model)
    step.training, step.seconds = training, seconds | step.seconds
    step.skipped = not_adapted(adapted.record, step.scored, base.scored)
    u.base.check_restored(u.method, cond, adapted.base())  # the same base serves the next condition
    return step


def stream_step(u: ZeroShot, cond: str, base: Step) -> Step:
    """Test in chunks, each scored before the method adapts on it (harness/grid/stream.py)."""
    x = methods.Inputs(
        u.base.model, u.base.tokenizer, u.spec, split_docs(u.docs, cond), u.settings, u.cfg.seed, Path()
    )
    carry = u.cfg.stream_mode == "carry"
    parts = (
        stream.sized(x.docs, u.cfg.stream_chunk_size) if carry else stream.chunks(x.docs, u.cfg.stream_chunks)
    )

    def lm_score(model) -> pd.DataFrame:  # lm-eval's scores of test alone (the chunks')
        u.base.check_tokenizer(u.method, cond)
        scorer = zero_shot.scorer(model, u.base.tokenizer, u.cfg.eval_batch_size)
        return zero_shot.score(scorer, u.task, u.cfg.accuracy)

    def given_back(what: str, model) -> None:
        u.base.check_restored(u.method, what, model)

    (scored, record, _), seconds = timed(  # its chunks' training and scoring
        u,
        f"train_{cond}",
        lambda: stream.run(u.method, x, parts, carry, base.scored, lm_score, given_back, u.base.at_load),
    )
    return Step(scored, training=record, skipped=not_adapted(record, scored, base.scored), seconds=seconds)


def classifier_unit(unit: Planned, spec: Spec, docs: dict) -> Unit:
    """Fine-tune a classifier on train from the base LM, then from the LM the method adapted on extra's
    texts, then on test's (then, for leak, on test's texts with their class names)."""
    cfg, k, method, method_settings = unit.config, unit.k, unit.cell.method, unit.settings
    settings = cfg  # the head's settings, with the task's overrides
    unit_seed = cfg.seed + k  # the head's init and the training order: a rerun reproduces the unit
    seconds, training, scored, exposed, skipped = {}, {}, {}, {}, {}
    for cond in cfg.conditions:
        clock = time.perf_counter()
        with tempfile.TemporaryDirectory() as work:
            backbone = models.resolve(cfg.base)
            # adapted on the split's texts, never train's; labels only for the leak
            if cond != conditions.BASE:
                inputs = methods.Inputs(
                    backbone, None, spec, split_docs(docs, cond), method_settings, unit_seed, Path(work)
                )
                adapted = method.run(inputs)
                training[f"pretrain_{cond}"], backbone = adapted.record, adapted.model
            if cfg.exposure:  # the backbone as TAPT left it, before the head is fine-tuned
                masked = not models.is_decoder(backbone)
                lm, tok = models.load_scoring_model(backbone, masked=masked)
                exposed[cond] = doc_scores.raw_scores(
                    lm, tok, exposure_docs(docs), masked, cfg.seed, cfg.eval_batch_size
                )
                del lm
            scored[cond], training[f"classify_{cond}"] = classifier.classify(
                backbone,
                docs["train"],
                docs["test"],
                len(spec.classes),
                settings,
                cfg.eval_batch_size,
                unit_seed,
            )
        if cond != conditions.BASE:
            skipped[cond] = not_adapted(adapted.record, scored[cond], scored[conditions.BASE])
        seconds[cond] = time.perf_counter() - clock
        log.info("%s subsample %d: %s done (%.1f s)", spec.slug, k, cond, seconds[cond])
    return unit_of(unit, spec, docs, scored, seconds, training, exposed, skipped)
