"""One classifier-flow unit, stage by stage, and the cost of the Trainer's step against a raw one.

For each base (the embedded encoder and SmolLM2 as a decoder): the seconds of the unit's stages
(pretraining on extra and on test, three fine-tunes, three predictions), then, on one batch of the
fine-tune, the Trainer's full step (training_step + optimizer step + zero_grad) against a raw step
(forward, backward, torch AdamW step, zero_grad) on the same model and batch, interleaved
(trainer, raw, trainer, raw, ...) --repeats times so that machine noise hits both alike. Usage:
    python benchmarks/classifier_unit.py --data-dir ../shared/data [--repeats 5]
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from tapt_step import interleaved_medians  # benchmarks/ is on the path when a script here runs

from harness.core.engine.models import MINILM, SMOLLM2, resolve
from harness.core.plumbing.sections import Sections
from harness.core.plumbing.settings import Settings, option, parse_script
from harness.scoring.classifier import ClassifierSettings, classify, trainer
from harness.tasks.protocol import SplitSettings
from tapt.corpus import raw_texts
from tapt.methods.raw_text.pretrain import TextSettings, pretrain


@dataclass(kw_only=True)
class UnitBenchOptions(Settings):
    """Which models are timed, and how often."""

    MINIMUM = {"repeats": 1}

    bases: list[str] = option([MINILM, SMOLLM2], "models to time")
    repeats: int = option(5, "interleaved repeats of the step comparison")


class UnitBenchArgs(Sections):
    """One unit's data (ag_news, m 50, n 50) and the study's training settings."""

    SECTIONS = {"sample": SplitSettings, "text": TextSettings, "head": ClassifierSettings}
    SECTIONS |= {"options": UnitBenchOptions}
    SMOKE = {"m": 8, "n": 8, "repeats": 1, "clf_epochs": 1.0, "pretrain_epochs": 1.0}
    DEFAULTS = {"task": "ag_news", "m": 50, "n": 50}


def stages(a: UnitBenchArgs, base: str, docs: dict, classes: int) -> dict[str, float]:
    seconds = {}
    for cond in ("base", "extra", "test"):
        with tempfile.TemporaryDirectory() as work:
            backbone = base
            if cond != "base":
                clock = time.perf_counter()
                pretrain(base, raw_texts(docs[cond]), a.text, a.sample.seed, Path(work))
                seconds[f"pretrain {cond}"] = time.perf_counter() - clock
                backbone = work
            _, log = classify(backbone, docs["train"], docs["test"], classes, a.head, 64, a.sample.seed)
            seconds[f"fine-tune ({cond})"] = log["train_seconds"]
            seconds[f"predict ({cond})"] = log["predict_seconds"]
    return seconds


def step_costs(a: UnitBenchArgs, base: str, docs: dict, classes: int) -> tuple[float, float, tuple]:
    with tempfile.TemporaryDirectory() as work:
        fit, _ = trainer(base, docs["train"], classes, a.head, 64, a.sample.seed, Path(work))
        fit.create_optimizer_and_scheduler(num_training_steps=2 * a.options.repeats + 2)
        fit.current_gradient_accumulation_steps = 1  # set by Trainer.train() otherwise
        model = fit.model
        model.train()
        batch = next(iter(fit.get_train_dataloader()))
        raw_opt = torch.optim.AdamW(model.parameters(), lr=a.head.clf_lr)

        def trainer_step():
            fit.training_step(model, batch)
            fit.optimizer.step()
            fit.optimizer.zero_grad()

        def raw_step():
            model(**batch).loss.backward()
            raw_opt.step()
            raw_opt.zero_grad()

        step, raw = interleaved_medians([trainer_step, raw_step], a.options.repeats)
    return step, raw, tuple(batch["input_ids"].shape)


def main() -> None:
    a = parse_script(UnitBenchArgs, __doc__)
    o = a.options
    spec, _ = a.sample.docs()
    from harness.tasks.protocol import subsample_docs

    docs = subsample_docs(spec, a.sample, a.sample.subsample)
    print(
        f"task {a.sample.task}, m {a.sample.m}, n {a.sample.n}; torch threads {torch.get_num_threads()}; "
        f"medians of {o.repeats} interleaved repeats"
    )
    for name in o.bases:
        base = resolve(name)
        seconds = stages(a, base, docs, len(spec.classes))
        print(f"\n{name}: one unit, {sum(seconds.values()):.1f} s in its stages")
        for stage, s in seconds.items():
            print(f"  {stage:22} {s:7.2f} s")
        step, raw, shape = step_costs(a, base, docs, len(spec.classes))
        print(
            f"  step on a {'x'.join(map(str, shape))} batch: Trainer {step:.3f} s, raw {raw:.3f} s, "
            f"ratio {step / raw:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
