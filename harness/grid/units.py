"""One (task, subsample) unit of the grid, computed in one pass down the layers: the task and its
subsample are loaded once, each stage gets its own settings and the objects it needs.

Two flows: zero_shot (prompt adapters, scored zero-shot through lm-eval) and classifier (raw text
pretraining, then a classification head fine-tuned on train)."""

from __future__ import annotations

import dataclasses
import logging
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from contamination import doc_scores
from contamination.exposure import condition_tests
from harness import results
from harness.core import conditions, models, weights
from harness.core.errors import UserError
from harness.core.settings import fingerprint
from harness.grid import stream
from harness.grid.config import GridConfig
from harness.scoring import classifier, zero_shot
from harness.tasks.protocol import Spec, find_spec, subsample_docs
from tapt import methods, output

log = logging.getLogger("tapt_bench.grid")


@dataclass
class Unit:
    """One finished (task, subsample) unit: what `results.write_unit` records under the task's dir."""

    slug: str
    k: int
    accs: dict
    probs: pd.DataFrame  # per test document and condition: class probabilities, prediction, correct
    record: dict  # settings, their hash, seconds per stage, training records


# the zero-shot base of this process, kept loaded for every unit it runs (locally or in a Ray worker), with
# the fingerprint of its weights at load: every reuse and every method's restore is checked against it
_LOADED: dict = {}
# the base's scores per (results root, base settings, task, subsample), with the model folder that computed
# them: methods side by side score the base once per unit (the same numbers: scoring is deterministic)
_BASE_SCORES: dict = {}


def base_key(cfg: GridConfig) -> tuple:
    return cfg.base, cfg.quantize, cfg.fallback_lora, cfg.bf16


def loaded_base(cfg: GridConfig):
    """(model, tokenizer, its state at load) of cfg's base, loaded once per process; a different base
    replaces it; a kept one is checked unchanged before it is reused."""
    if base_key(cfg) in _LOADED:
        model, tokenizer, at_load = _LOADED[base_key(cfg)]
        if weights.differences(at_load, weights.base_state(model, tokenizer)):  # never reused unverified
            _LOADED.clear()
    if base_key(cfg) not in _LOADED:
        _LOADED.clear()
        path = models.resolve(cfg.base)
        models.check_base(path)
        model = models.load_causal_lm(path, cfg.quantize, cfg.fallback_lora, cfg.bf16)
        tokenizer = models.tokenizer(path)
        _LOADED[base_key(cfg)] = (model, tokenizer, weights.base_state(model, tokenizer))
    return _LOADED[base_key(cfg)]


def check_restored(method: methods.Method, cond: str, at_load: dict, base, tokenizer) -> None:
    """Stop the run when a method's restore did not give the base back as it was loaded (its weights, the
    hooks on its modules, its config, the tokenizer): the next condition (and unit) would be scored on a
    changed base."""
    named = hasattr(base, "named_parameters")
    changed = weights.differences(at_load, weights.base_state(base, tokenizer)) if named else "not a model"
    if changed:
        raise UserError(
            f"method {method.name} ({method.source}) did not give the base back after the {cond} condition "
            f"(it differs from the base as loaded: {changed}); its Adapted.restore must return the base "
            "unchanged (e.g. a PEFT model's unload(), with any hook it added removed, the tokenizer and the "
            "config as they were). Stopped before the next condition was scored."
        )


def check_tokenizer(method: methods.Method, cond: str, at_load: dict, tokenizer) -> None:
    """Stop before scoring when a method changed the tokenizer (added tokens fail deep inside scoring)."""
    now = weights.tokenizer_print(tokenizer)
    changed = weights.differences({k: v for k, v in at_load.items() if k in now}, now)
    if changed:
        raise UserError(
            f"method {method.name} ({method.source}) changed the tokenizer in the {cond} condition "
            f"({changed}); a method adapts the model and leaves the tokenizer as it was. Stopped before "
            "scoring."
        )


def compute_unit(cfg: GridConfig, slug: str, k: int, keep_adapters: bool = False) -> Unit:
    """Compute one unit of either flow; nothing is written but kept adapters."""
    spec = find_spec(slug, cfg.include_path)
    docs = subsample_docs(spec, cfg.sample, k)
    if cfg.flow == "classifier":
        return classifier_unit(cfg, spec, k, docs)
    try:
        return zero_shot_unit(cfg, spec, k, docs, keep_adapters)
    except BaseException:
        _LOADED.clear()  # a unit that failed mid-way may leave its adapter in the base: never reuse that
        raise


def split_docs(docs: dict[str, pd.DataFrame], cond: str) -> pd.DataFrame:
    """The documents a condition adapts on: its split's, with the gold labels only for the leak (the
    column is absent otherwise, so that a method cannot read it)."""
    split, answers = conditions.TAPT[cond]
    return docs[split] if answers else docs[split].drop(columns="label")


def zero_shot_unit(cfg: GridConfig, spec: Spec, k: int, docs: dict, keep_adapters: bool) -> Unit:
    """Score base, then adapt (the config's method) and score once per condition, restoring the base
    after each."""
    base, tokenizer, at_load = loaded_base(cfg)
    method = cfg.adaptation()
    settings = cfg.settings_of(method, spec.slug)
    metadata = {**dataclasses.asdict(cfg.sample), "subsample": k, "split": conditions.TEST}
    task = zero_shot.lm_eval_task(spec, metadata, cfg.include_path, docs[conditions.TEST])
    tdir = results.task_dir(cfg.out, cfg.m, cfg.n, cfg.tag, spec.slug)
    seconds, training, exposed, skipped = {}, {}, {}, {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        seconds[name], clock = time.perf_counter() - clock, time.perf_counter()
        log.info("%s subsample %d: %s done (%.1f s)", spec.slug, k, name, seconds[name])

    def score(cond: str, model) -> None:  # lm-eval's scores of test; the exposure test's of test and extra
        lm = zero_shot.scorer(model, tokenizer, cfg.eval_batch_size, keep_stats=cfg.exposure)
        scored[cond] = zero_shot.score(lm, task, cfg.accuracy)
        lap(f"score_{cond}")
        if cfg.exposure:  # test's prompts from the scoring pass's statistics: only extra's are run again
            exposed[cond] = doc_scores.prompt_scores(
                model,
                tokenizer,
                spec,
                exposure_docs(docs),
                cfg.eval_batch_size,
                known=lm.stats,
                codec_context=cfg.codec_context,
                codec_block=cfg.codec_block,
                seed=cfg.seed,
                extra=cfg.loaded_scores(),
            )
            lap(f"exposure_{cond}")

    def lm_score(model) -> pd.DataFrame:  # lm-eval's scores of test alone (the stream's chunks)
        check_tokenizer(method, conditions.STREAM, at_load, tokenizer)
        return zero_shot.score(zero_shot.scorer(model, tokenizer, cfg.eval_batch_size), task, cfg.accuracy)

    def given_back(what: str, model) -> None:
        check_restored(method, what, at_load, model, tokenizer)

    shared = (cfg.out, fingerprint(cfg.base_settings()), spec.slug, k)
    if shared in _BASE_SCORES and _BASE_SCORES[shared][0] != cfg.tag:  # another method's, on these docs
        base_from, base_scored, base_exposed = _BASE_SCORES[shared]
        scored, exposed = dict(base_scored), dict(base_exposed)
    else:
        base_from, scored = None, {}
        score(conditions.BASE, base)
        _BASE_SCORES[shared] = (cfg.tag, dict(scored), dict(exposed))
    for cond in cfg.conditions[1:]:  # extra, test (and leak): each adapts on its split's documents
        split, answers = conditions.TAPT[cond]
        if cond == conditions.STREAM:  # test in chunks, each scored before the method adapts on it
            inputs = methods.Inputs(base, tokenizer, spec, split_docs(docs, cond), settings, cfg.seed, Path())
            carry = cfg.stream_mode == "carry"
            test = inputs.docs
            parts = (
                stream.sized(test, cfg.stream_chunk_size) if carry else stream.chunks(test, cfg.stream_chunks)
            )
            scored[cond], training[cond], base = stream.run(
                method, inputs, parts, carry, scored[conditions.BASE], lm_score, given_back, at_load
            )
            skipped[cond] = not_adapted(training[cond], scored[cond], scored[conditions.BASE])
            lap(f"train_{cond}")  # its chunks' training and scoring
            continue
        with tempfile.TemporaryDirectory() as work:  # the method's scratch dir
            inputs = methods.Inputs(
                base, tokenizer, spec, split_docs(docs, cond), settings, cfg.seed, Path(work)
            )
            adapted = method.run(inputs, at_load, cond)
        check_tokenizer(method, cond, at_load, tokenizer)
        rec = {**dataclasses.asdict(settings), "split": split, "answers": answers, **adapted.record}
        rec["adapter_sha256"] = weights.adapter_sha256(
            adapted.model
        )  # which adapter scored it (None: no PEFT)
        rec |= methods.vote_agreement(adapted.record, docs[split])  # made-up labels against the gold ones
        training[cond] = {key: v for key, v in rec.items() if key != "rows"}
        if keep_adapters and hasattr(adapted.model, "save_pretrained"):
            with output.staged(tdir / "adapters" / f"{k}_{cond}", overwrite=True) as tmp:
                adapted.model.save_pretrained(tmp)
                output.write_record(tmp, {"kind": "adapter", "task": spec.slug, "subsample": k, **rec})
        lap(f"train_{cond}")
        score(cond, adapted.model)
        skipped[cond] = not_adapted(adapted.record, scored[cond], scored[conditions.BASE])
        base = adapted.base()  # the adaptation undone: the same base serves the next condition
        check_restored(method, cond, at_load, base, tokenizer)
    _LOADED[base_key(cfg)] = base, tokenizer, at_load
    unit = unit_of(cfg, spec, k, docs, scored, seconds, training, exposed, skipped)
    if base_from:
        unit.record["base_from"] = base_from
    return unit


def classifier_unit(cfg: GridConfig, spec: Spec, k: int, docs: dict) -> Unit:
    """Fine-tune a classifier on train from the base LM, then from the LM the method adapted on extra's
    texts, then on test's (then, for leak, on test's texts with their class names)."""
    settings = cfg.for_task(spec.slug)
    method = cfg.adaptation()
    method_settings = cfg.settings_of(method, spec.slug)
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
    return unit_of(cfg, spec, k, docs, scored, seconds, training, exposed, skipped)


def not_adapted(record: dict, scored: pd.DataFrame, base: pd.DataFrame) -> str | None:
    """Why a condition's model is not an adaptation (None when it is): its method learned from no
    document or took no step, or its model scores every test document exactly as the base does."""
    why = methods.nothing_learned(record)
    if why:
        return why
    if np.array_equal(np.stack(scored["probs"].to_numpy()), np.stack(base["probs"].to_numpy())):
        return "scores every test document exactly as the base does"
    return None


def exposure_docs(docs: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The documents the exposure test scores: test's and extra's, with their split."""
    return pd.concat(
        [docs[s].assign(split=s) for s in (conditions.TEST, conditions.EXTRA)], ignore_index=True
    )


def majority(docs: dict[str, pd.DataFrame]) -> dict[str, float]:
    """Accuracy on test of the train subsample's most frequent gold index (ties: the lowest; an lm-eval
    task without a training split: extra's), the most choices a doc has, and the mean chance accuracy."""
    counts = docs["test"]["choices"].map(len)
    known = docs["train"] if len(docs["train"]) else docs[conditions.EXTRA]
    top = int(np.bincount(known["label"], minlength=int(counts.max())).argmax())
    return {
        "majority": float((docs["test"]["label"] == top).mean()),
        "num_classes": int(counts.max()),
        "majority_all": float((1.0 / counts).mean()),
    }


def unit_of(
    cfg: GridConfig,
    spec: Spec,
    k: int,
    docs: dict,
    scored: dict,
    seconds: dict,
    training: dict,
    exposed: dict,
    skipped: dict,
) -> Unit:
    """The unit's accuracies, its per-example probabilities, and what made them (with the conditions
    whose model is not an adaptation, and why)."""
    accs = {cond: float(df["correct"].mean()) for cond, df in scored.items()} | majority(docs)
    probs = pd.concat([df.assign(condition=cond) for cond, df in scored.items()], ignore_index=True)
    record = {
        "settings": cfg.result_settings(),
        "settings_hash": cfg.settings_hash(),
        "seconds": seconds,
        "training": training,
    }
    if any(skipped.values()):  # recorded only where a condition was not adapted: older units match
        record[results.NOT_ADAPTED] = {c: why for c, why in skipped.items() if why}
    if all("correct_norm" in df for df in scored.values()):  # the task defines acc_norm too
        record["acc_norm"] = {cond: float(df["correct_norm"].mean()) for cond, df in scored.items()}
    if all("correct_mean_token" in df for df in scored.values()):  # zero-shot: both rules, whichever counts
        record["accuracy_by_rule"] = {
            rule: {cond: float(df[f"correct_{rule}"].mean()) for cond, df in scored.items()}
            for rule in zero_shot.RULES
        }
    if exposed:
        record["exposure"] = condition_tests(exposed, conditions.BASE, cfg.text_score, cfg.seed)
    return Unit(spec.slug, k, accs, probs, record)
