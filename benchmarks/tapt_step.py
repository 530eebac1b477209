"""Cost of one TRL training step against a raw forward+backward of the same batch on the same model.

For padding and packing, LoRA and QLoRA: builds the SFTTrainer exactly as `tapt-bench train` does,
takes one batch from its dataloader, then times the trainer's full step (training_step + optimizer
step + zero_grad) and a bare `model(**batch, use_cache=False).loss.backward()`, interleaved (trainer,
raw, trainer, raw, ...) --repeats times so that machine noise hits both alike; medians.
Prints the ratio and tokens per second of each, and the raw step under bf16 autocast (torch.autocast on
the model's device) against fp32, with the difference of their losses in the last repeat (the same
weights: only the trainer's step updates them). Usage:
    python benchmarks/tapt_step.py --data-dir ../shared/data [--base SmolLM2-135M-Instruct]
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from harness.core.engine import models
from harness.core.engine.models import ModelSettings, resolve
from harness.core.plumbing.sections import Sections
from harness.core.plumbing.settings import Settings, option, parse_script
from harness.tasks.protocol import SplitSettings
from tapt.adapter import AdapterArgs, prepare


@dataclass(kw_only=True)
class StepBenchOptions(Settings):
    """How the step is timed."""

    MINIMUM = {"batch_size": 1, "repeats": 1}

    batch_size: int = option(8, "training batch size")
    repeats: int = option(5, "interleaved timed repeats (the medians are reported)")


class StepBenchArgs(Sections):
    """Which data (ag_news's extra split) and model the step is timed on."""

    SECTIONS = {"sample": SplitSettings, "model": ModelSettings, "options": StepBenchOptions}
    SMOKE = {"n": 8, "batch_size": 2, "repeats": 1}
    DEFAULTS = {"task": "ag_news"}


def interleaved_medians(fns, repeats: int) -> list[float]:
    """Median seconds of each function, timed in turn `repeats` times after one warm-up call each."""
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, spent in zip(fns, times):
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def measure(args: AdapterArgs, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as work:
        spec, docs = args.sample.docs()
        base, adapter = args.model.base, args.adapter
        model = models.load_causal_lm(base, adapter.quantize, adapter.fallback_lora)
        tokenizer = models.tokenizer(base)
        run = prepare(spec, docs, adapter, args.options.leak, args.sample.seed, model, tokenizer, Path(work))
        trainer = run.trainer
        trainer.create_optimizer_and_scheduler(num_training_steps=repeats + 1)
        trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train() otherwise
        model = trainer.model
        model.train()
        batch = next(iter(trainer.get_train_dataloader()))
        tokens = int(batch["attention_mask"].sum())

        def trainer_step():
            trainer.training_step(model, batch)
            trainer.optimizer.step()
            trainer.optimizer.zero_grad()

        losses = {}

        def raw_step(bf16: bool = False):  # a hand-written loop: no KV cache in training, as the trainer
            with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=bf16):
                loss = model(**batch, use_cache=False).loss
            loss.backward()
            model.zero_grad()
            losses[bf16] = float(loss)

        step, raw, bf16 = interleaved_medians([trainer_step, raw_step, lambda: raw_step(True)], repeats)
    return {
        "step": step,
        "raw": raw,
        "bf16": bf16,
        "loss_difference": abs(losses[True] - losses[False]),
        "tokens": tokens,
        "shape": tuple(batch["input_ids"].shape),
    }


def main() -> None:
    a = parse_script(StepBenchArgs, __doc__)
    o = a.options
    torch.manual_seed(0)
    base = resolve(a.model.base)
    print(
        f"base {a.model.base}, task {a.sample.task}, batch {o.batch_size}, medians of {o.repeats} "
        f"interleaved repeats, torch threads {torch.get_num_threads()}"
    )
    print(
        f"{'mode':8} {'adapter':6} {'batch shape':12} {'trainer s':>9} {'raw s':>7} {'ratio':>6} "
        f"{'trainer tok/s':>13} {'raw tok/s':>9} {'raw bf16 s':>10} {'bf16/fp32':>9} {'|loss diff|':>11}"
    )
    for packing in (False, True):
        for quantize in ("none", "4bit"):
            args = AdapterArgs(
                task=a.sample.task,
                split="extra",
                base=base,
                out="unused",
                data_dir=a.sample.data_dir,
                n=8 * o.batch_size if packing else o.batch_size,
                m=8,
                packing=packing,
                quantize=quantize,
                batch_size=o.batch_size,
            )
            r = measure(args, o.repeats)
            print(
                f"{'packing' if packing else 'padding':8} {'QLoRA' if quantize == '4bit' else 'LoRA':6} "
                f"{'x'.join(map(str, r['shape'])):12} {r['step']:9.2f} {r['raw']:7.2f} "
                f"{r['step'] / r['raw']:6.2f} "
                f"{r['tokens'] / r['step']:13.0f} {r['tokens'] / r['raw']:9.0f} {r['bf16']:10.2f} "
                f"{r['bf16'] / r['raw']:9.2f} {r['loss_difference']:11.2e}",
                flush=True,
            )


if __name__ == "__main__":
    main()
