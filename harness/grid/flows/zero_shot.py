"""The zero-shot flow: score the base through lm-eval, then adapt it (the unit's method) and score once per
condition, the base taken back after each (or, with score_together, every condition's adapter trained
first and all scored in one pass); prompts, not a head, read the classes."""

from __future__ import annotations

import dataclasses
import logging
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from contamination import doc_scores
from harness.core import adapters, conditions, models, weights
from harness.core.errors import UserError
from harness.core.settings import Settings
from harness.grid import stream
from harness.grid.base_model import BASE_SCORES, LOADED, Base, loaded_base
from harness.grid.config import GridConfig
from harness.grid.flows import Flow, check_exposure_parts
from harness.grid.plan import Planned
from harness.grid.unit_record import Unit, exposure_docs, not_adapted, split_docs, unit_of
from harness.scoring import zero_shot as scoring
from harness.tasks.protocol import Spec
from tapt import methods, output
from tapt.methods import prompt_tapt

log = logging.getLogger("tapt_bench.grid")


def check(cfg: GridConfig) -> None:
    """The exposure test's parts are read within it: CoDeC and plug-in scores need exposure: true."""
    check_exposure_parts(cfg, cfg.exposure)


def check_base(base: str) -> str | None:
    """Why the base (a resolved path or hub id) cannot serve this flow, after its name; None if it can."""
    if not models.is_decoder(base):
        return (
            "is an encoder, and the zero_shot flow scores prompts with a causal LM; "
            "name a causal LM (e.g. SmolLM2-135M-Instruct) or set flow: classifier"
        )
    return None


def unit(planned: Planned, keep_adapters: bool = False) -> Unit:
    """Score base, then adapt (the unit's method) and score once per condition, restoring the base
    after each: a step per condition, each returning its outcome. A unit that fails mid-way may leave its
    adapter in the base: the loaded base is then forgotten, never reused."""
    spec, docs = planned.inputs()
    try:
        return zero_shot_unit(planned, spec, docs, keep_adapters)
    except BaseException:
        LOADED.forget()
        raise


def null_model(unit: Planned, base_scored: pd.DataFrame) -> Step:
    """The unit's method adapted on the subsample's third draw (neither test nor extra) and scored as
    every condition is: the model on which `contamination calibrate` reads each detector's false positives
    (zero-shot flow). `base_scored`: the base's lm-eval scores of test, as the unit recorded them (read,
    not computed again: scoring is deterministic), against which a model that did not move is told."""
    cfg = unit.config
    spec, docs = unit.inputs()
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
    task: scoring.EvalTask
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
    """The unit's steps: the base's, then one per condition (scored together, or one at a time)."""
    u = unit_inputs(unit, spec, docs, keep_adapters)
    cfg = unit.config
    base, base_from = found_base(u)
    adapted = [c for c in cfg.conditions[1:] if c != conditions.STREAM]  # each adapts on its split
    if cfg.score_together:
        steps = together(u, adapted, base)
    else:
        steps = {conditions.BASE: base or kept_base(u, score(u, conditions.BASE, u.base.model))}
        steps |= {cond: condition_step(u, cond, steps[conditions.BASE]) for cond in adapted}
    if conditions.STREAM in cfg.conditions:
        steps[conditions.STREAM] = stream_step(u, conditions.STREAM, steps[conditions.BASE])
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
    task = scoring.lm_eval_task(spec, metadata, cfg.include_path, docs[conditions.TEST])
    return ZeroShot(unit, spec, docs, loaded_base(cfg), task, keep_adapters)


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
    lm = lm or scoring.scorer(model, u.base.tokenizer, u.cfg.eval_batch_size)
    scored, seconds = timed(u, f"score_{cond}", lambda: scoring.score(lm, u.task, u.cfg.accuracy, name))
    if not u.cfg.exposure:
        return Step(scored, seconds=seconds)
    with adapters.active(model, name):
        exposed, more = timed(u, f"exposure_{cond}", lambda: exposure(u, model))
    return Step(scored, exposed, seconds=seconds | more)


def exposure(u: ZeroShot, model) -> pd.DataFrame:
    """The exposure test's scores of test and extra under `model`."""
    return doc_scores.prompt_scores(
        model,
        u.base.tokenizer,
        u.spec,
        exposure_docs(u.docs),
        u.cfg.eval_batch_size,
        codec_context=u.cfg.codec_context,
        codec_block=u.cfg.codec_block,
        seed=u.cfg.seed,
        extra=list(u.unit.cell.scores),
    )


def found_base(u: ZeroShot) -> tuple[Step | None, str | None]:
    """The base's scores and the model folder that computed them, where another method's unit of the same
    documents and base settings did (scoring is deterministic: the same numbers); (None, None) if none."""
    found = BASE_SCORES.of_another(base_key(u), u.unit.cell.tag)
    if found is None:
        return None, None
    tag, scored, exposed = found
    return Step(scored[conditions.BASE], exposed.get(conditions.BASE)), tag


def kept_base(u: ZeroShot, step: Step) -> Step:
    """The base's step, kept for the other methods' units of the same documents."""
    exposed = {} if step.exposed is None else {conditions.BASE: step.exposed}
    BASE_SCORES.keep(base_key(u), u.unit.cell.tag, {conditions.BASE: step.scored}, exposed)
    return step


def base_key(u: ZeroShot) -> tuple:
    """What the base's scores are kept under: the results root, the base's settings, the task, the draw."""
    return (u.cfg.out, u.unit.cell.base_hash, u.spec.slug, u.k)


def condition_step(u: ZeroShot, cond: str, base: Step) -> Step:
    """Adapt the base on the condition's split (the method's run), score it, and take the base back."""
    adapted, step = trained(u, cond)
    step = scored_alone(u, cond, adapted, step)
    step.skipped = not_adapted(adapted.record, step.scored, base.scored)
    return step


def trained(u: ZeroShot, cond: str) -> tuple[methods.Adapted, Step]:
    """The method's run on the condition's split: its adapted model, and a step holding its record."""
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
    return adapted, Step(pd.DataFrame(), training=training, seconds=seconds)


def scored_alone(u: ZeroShot, cond: str, adapted: methods.Adapted, step: Step) -> Step:
    """The adapted model scored on its own; the base taken back."""
    alone = score(u, cond, adapted.model)
    step.scored, step.exposed, step.seconds = alone.scored, alone.exposed, step.seconds | alone.seconds
    u.base.check_restored(u.method, cond, adapted.base())  # the same base serves the next condition
    return step


def together(u: ZeroShot, conds: list[str], base: Step | None) -> dict[str, Step]:
    """Train every condition's adapter first, each kept off the base (the base taken back after each),
    then score the base (unless another method's unit did) and every adapter in one pass: each batch of
    prompts under all of them (PEFT's adapter_names). A method that returns anything but one LoRA adapter
    over the base has its model scored on its own, as one at a time does."""
    steps, kept, made = {}, {}, {}
    for cond in conds:
        adapted, steps[cond] = trained(u, cond)
        made[cond] = adapted.record
        lora = adapters.lone_lora(adapted.model) if adapted.restore is None else None
        if lora is None:
            scored_alone(u, cond, adapted, steps[cond])
        else:
            kept[cond] = lora
            u.base.check_restored(u.method, cond, adapted.base())
    if not kept:
        base = base or kept_base(u, score(u, conditions.BASE, u.base.model))
    else:
        named = ({} if base else {conditions.BASE: adapters.BASE}) | {cond: cond for cond in kept}
        model = adapters.put_on(u.base.model, kept)
        lm = scoring.scorer(model, u.base.tokenizer, u.cfg.eval_batch_size, tuple(named.values()))
        passed = 0.0
        for cond, name in named.items():
            step = score(u, cond, model, lm, name)
            passed += step.seconds.pop(f"score_{cond}")  # the first computes the pass; the others read it
            if cond == conditions.BASE:
                base = kept_base(u, step)
            else:
                steps[cond].scored, steps[cond].exposed = step.scored, step.exposed
                steps[cond].seconds |= step.seconds
        steps[conds[0]].seconds[f"score_{'+'.join(named)}"] = passed
        u.base.check_restored(u.method, "+".join(kept), model.unload())
    for cond in conds:
        steps[cond].skipped = not_adapted(made[cond], steps[cond].scored, base.scored)
    return {conditions.BASE: base} | steps


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
        scorer = scoring.scorer(model, u.base.tokenizer, u.cfg.eval_batch_size)
        return scoring.score(scorer, u.task, u.cfg.accuracy)

    def given_back(what: str, model) -> None:
        u.base.check_restored(u.method, what, model)

    (scored, record, _), seconds = timed(  # its chunks' training and scoring
        u,
        f"train_{cond}",
        lambda: stream.run(u.method, x, parts, carry, base.scored, lm_score, given_back, u.base.at_load),
    )
    return Step(scored, training=record, skipped=not_adapted(record, scored, base.scored), seconds=seconds)


FLOW = Flow(
    name="zero_shot",
    sections=("form",),  # the base's form (4-bit, bf16): a classifier loads no 4-bit base
    default_method=prompt_tapt.METHOD.name,
    check=check,
    check_task=lambda spec: None,
    check_base=check_base,
    unit=unit,
    null_model=null_model,
    keeps_base=True,
)
