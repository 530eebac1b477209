"""The zero-shot flow: score the base through lm-eval, then adapt it (the unit's method) and score once per
condition, the base taken back after each (or, with score_together, every condition's adapter trained
first and all scored in one pass); prompts, not a head, read the classes."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pandas as pd

from harness import results
from harness.core.design import conditions
from harness.core.engine import adapters, models, weights
from harness.core.engine.models import FormSettings
from harness.core.plumbing.errors import SettingsError, UserError
from harness.core.plumbing.sections import Sections, default_of
from harness.grid.unit import stream
from harness.grid.unit.base_model import LOADED, loaded_base
from harness.grid.unit.flow import Flow, check_exposure_parts
from harness.grid.unit.flows.zero_shot_unit import ZeroShot, found_base, kept_base, score, timed, unit_inputs
from harness.grid.unit.unit_plan import UnitPlan
from harness.grid.unit.unit_record import Step, UnitRecord, not_adapted, record_of
from harness.scoring import zero_shot as scoring
from tapt import methods, output
from tapt.methods import prompt_tapt


def check(cfg: Sections) -> None:
    """The exposure test's parts are read within it: CoDeC and plug-in scores need exposure: true. The
    classifier's head settings are refused: this flow trains no head, and would ignore them."""
    check_exposure_parts(cfg.grid, cfg.grid.exposure)
    head = getattr(cfg, "head", None)
    # the study's per-task settings (task_overrides) carry head keys for the classifier: a task's config
    # holds them, and they are not the user's
    per_task = {(k, repr(v)) for o in cfg.grid.task_overrides.values() for k, v in o.items()}
    for field in dataclasses.fields(head) if head is not None else ():
        value = getattr(head, field.name)
        if value != default_of(field) and (field.name, repr(value)) not in per_task:
            problem = f"sets the classifier's head; the zero_shot flow trains none: remove it (got {value!r})"
            raise SettingsError.of(field.name, problem)


def check_base(base: str) -> str | None:
    """Why the base (a resolved path or hub id) cannot serve this flow, after its name; None if it can."""
    if not models.is_decoder(base):
        return (
            "is an encoder, and the zero_shot flow scores prompts with a causal LM; "
            "name a causal LM (e.g. SmolLM2-135M-Instruct) or set flow: classifier"
        )
    return None


def compute(plan: UnitPlan, keep_adapters: bool = False) -> UnitRecord:
    """Score base, then adapt (the unit's method) and score once per condition, restoring the base
    after each: a step per condition, each returning its outcome. A unit that fails mid-way may leave its
    adapter in the base: the loaded base is then forgotten, never reused."""
    try:
        return computed(unit_inputs(plan, plan.docs(), keep_adapters))
    except BaseException:
        LOADED.forget()
        raise


def null_model(plan: UnitPlan, base_scored: pd.DataFrame) -> Step:
    """The unit's method adapted on the subsample's third draw (neither test nor extra) and scored as
    every condition is: the model on which `contamination calibrate` reads each detector's false positives
    (zero-shot flow). `base_scored`: the base's lm-eval scores of test, as the unit recorded them (read,
    not computed again: scoring is deterministic), against which a model that did not move is told."""
    docs = plan.docs()
    if len(docs[conditions.NULL]) < plan.sample.n:
        raise UserError(
            f"{plan.spec.slug}: the null model needs a third draw of n = {plan.sample.n} documents beside "
            f"train, extra and test, and the pool leaves {len(docs[conditions.NULL])}: lower n, or pass "
            "--no-null-model"
        )
    try:
        u = unit_inputs(plan, docs, keep_adapters=False)
        order = base_scored.set_index("row").loc[docs[conditions.TEST]["row"]].reset_index()
        return condition_step(u, conditions.NULL, Step(order))
    except BaseException:
        LOADED.forget()
        raise


def computed(u: ZeroShot) -> UnitRecord:
    """The unit's steps: the base's, then one per condition (scored together, or one at a time)."""
    grid = u.plan.grid
    base, base_from = found_base(u)
    adapted = [c for c in grid.conditions[1:] if c != conditions.STREAM]  # each adapts on its split
    if grid.score_together:
        steps = together(u, adapted, base)
    else:
        steps = {conditions.BASE: base or kept_base(u, score(u, conditions.BASE, u.base.model))}
        steps |= {cond: condition_step(u, cond, steps[conditions.BASE]) for cond in adapted}
    if conditions.STREAM in grid.conditions:
        steps[conditions.STREAM] = stream_step(u, conditions.STREAM, steps[conditions.BASE])
    return record_of(
        u.plan,
        u.docs,
        {c: s.scored for c, s in steps.items()},
        {name: t for s in steps.values() for name, t in s.seconds.items()},
        {c: s.training for c, s in steps.items() if s.training is not None},
        {c: s.exposed for c, s in steps.items() if s.exposed is not None},
        {c: s.skipped for c, s in steps.items() if c != conditions.BASE},
        base_from,
        gold={c: s.gold for c, s in steps.items() if s.gold is not None},
    )


def condition_step(u: ZeroShot, cond: str, base: Step) -> Step:
    """Adapt the base on the condition's split (the method's run), score it, and take the base back."""
    adapted, trained_step = trained(u, cond)
    alone = scored_alone(u, cond, adapted)
    return finished(trained_step, alone, not_adapted(adapted.record, alone.scored, base.scored))


def finished(trained_step: Step, scored: Step, skipped: str | None) -> Step:
    """A condition's step: its training (record, seconds) and its scores, and why it is not an adaptation."""
    seconds = trained_step.seconds | scored.seconds
    return Step(scored.scored, scored.exposed, trained_step.training, skipped, seconds, scored.gold)


def trained(u: ZeroShot, cond: str) -> tuple[methods.Adapted, Step]:
    """The method's run on the condition's split: its adapted model, and a step of its record and seconds
    (no scores yet)."""
    split, answers = conditions.TAPT[cond]

    def adapt():
        with tempfile.TemporaryDirectory() as work:  # the method's scratch dir
            adapted = u.method.run(u.inputs(cond, Path(work)), u.base.at_load, cond)
        u.base.check_tokenizer(u.method, cond)
        rec = {**dataclasses.asdict(u.settings), "split": split, "with_answers": answers, **adapted.record}
        sample = u.plan.sample  # the draw and prompt it was trained on: lm_eval scores that draw by default
        prompt = {"prompt_format": sample.prompt_format, "accuracy": u.plan.grid.accuracy}  # how read
        prompt |= {"m": sample.m, "n": sample.n, "seed": sample.seed, "chat_model": sample.chat_model}
        prompt["train_draw"] = sample.train_draw
        rec["adapter_sha256"] = weights.adapter_sha256(
            adapted.model
        )  # which adapter scored it (None: no PEFT)
        rec |= methods.vote_agreement(adapted.record, u.docs[split])  # made-up labels against the gold ones
        if u.keep_adapters and hasattr(adapted.model, "save_pretrained"):
            with output.staged(results.adapter_path(u.plan.folder, u.k, cond), overwrite=True) as tmp:
                adapted.model.save_pretrained(tmp)
                output.write_record(
                    tmp, {"kind": "adapter", "task": u.spec.slug, "subsample": u.k, **rec, **prompt}
                )
        return adapted, {key: v for key, v in rec.items() if key != "rows"}

    (adapted, training), seconds = timed(u, f"train_{cond}", adapt)
    return adapted, Step(pd.DataFrame(), training=training, seconds=seconds)


def scored_alone(u: ZeroShot, cond: str, adapted: methods.Adapted) -> Step:
    """The adapted model's scores on its own; the base taken back."""
    alone = score(u, cond, adapted.model)
    u.base.check_restored(u.method, cond, adapted.base())  # the same base serves the next condition
    return alone


def together(u: ZeroShot, conds: list[str], base: Step | None) -> dict[str, Step]:
    """Train every condition's adapter first, each kept off the base (the base taken back after each),
    then score the base (unless another method's unit did) and every adapter in one pass: each batch of
    prompts under all of them (PEFT's adapter_names). A method that returns anything but one LoRA adapter
    over the base has its model scored on its own, as one at a time does."""
    made, scores, kept = {}, {}, {}  # per condition: (adapted, its trained step), its scores, its LoRA
    for cond in conds:
        made[cond] = trained(u, cond)
        adapted = made[cond][0]
        lora = adapters.lone_lora(adapted.model) if adapted.restore is None else None
        if lora is None:
            scores[cond] = scored_alone(u, cond, adapted)
        else:
            kept[cond] = lora
            u.base.check_restored(u.method, cond, adapted.base())
    if not kept:
        base = base or kept_base(u, score(u, conditions.BASE, u.base.model))
    else:
        base, scores, passed = scored_together(u, kept, base, scores)
        first = made[conds[0]]
        made[conds[0]] = first[0], dataclasses.replace(first[1], seconds=first[1].seconds | passed)
    return {conditions.BASE: base} | {
        cond: finished(step, scores[cond], not_adapted(adapted.record, scores[cond].scored, base.scored))
        for cond, (adapted, step) in made.items()
    }


def scored_together(u: ZeroShot, kept: dict, base: Step | None, scores: dict) -> tuple[Step, dict, dict]:
    """The base (unless given) and every kept adapter scored in one pass: the base's step, every
    condition's scores, and the pass's seconds (named by all it scored)."""
    named = ({} if base else {conditions.BASE: adapters.BASE}) | {cond: cond for cond in kept}
    model = adapters.put_on(u.base.model, kept)
    lm = scoring.scorer(model, u.base.tokenizer, u.plan.grid.eval_batch_size, tuple(named.values()))
    passed, scores = 0.0, dict(scores)
    for cond, name in named.items():
        step = score(u, cond, model, lm, name)
        passed += step.seconds[f"score_{cond}"]  # the first computes the pass; the others read it
        step = dataclasses.replace(
            step, seconds={k: v for k, v in step.seconds.items() if k != f"score_{cond}"}
        )
        if cond == conditions.BASE:
            base = kept_base(u, step)
        else:
            scores[cond] = step
    u.base.check_restored(u.method, "+".join(kept), model.unload())
    return base, scores, {f"score_{'+'.join(named)}": passed}


def stream_step(u: ZeroShot, cond: str, base: Step) -> Step:
    """Test in chunks, each scored before the method adapts on it (harness/grid/unit/stream.py)."""
    grid = u.plan.grid
    x = u.inputs(cond, Path())
    carry = grid.stream_mode == "carry"
    parts = (
        stream.sized(x.docs, grid.stream_chunk_size) if carry else stream.chunks(x.docs, grid.stream_chunks)
    )

    def lm_score(model) -> pd.DataFrame:  # lm-eval's scores of test alone (the chunks')
        u.base.check_tokenizer(u.method, cond)
        scorer = scoring.scorer(model, u.base.tokenizer, grid.eval_batch_size)
        return scoring.score(scorer, u.task, grid.accuracy)

    def given_back(what: str, model) -> None:
        u.base.check_restored(u.method, what, model)

    (scored, record, _), seconds = timed(  # its chunks' training and scoring
        u,
        f"train_{cond}",
        lambda: stream.run(u.method, x, parts, carry, base.scored, lm_score, given_back, u.base.at_load),
    )
    return Step(scored, training=record, skipped=not_adapted(record, scored, base.scored), seconds=seconds)


def preload(plan: UnitPlan) -> None:
    """A worker loads the base once, in its form, and keeps it for all its units."""
    loaded_base(plan.model, plan.section("form"))


FLOW = Flow(
    name="zero_shot",
    # the base's form (4-bit, bf16): a classifier loads no 4-bit base
    sections={"form": (FormSettings, "the base's form, for every method")},
    default_method=prompt_tapt.METHOD.name,
    check=check,
    check_task=lambda spec: None,
    check_base=check_base,
    compute=compute,
    null_model=null_model,
    preload=preload,
)
