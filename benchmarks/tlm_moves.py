"""Where TLM moves the model: the share of test predictions that TLM, at its authors' values, changes
against the base, at several n, on several tasks.

For each task and n, one subsample's test split (m 8, the methods study's draw): the base scores it
zero-shot through lm-eval; TLM adapts on its unlabeled prompts (the test condition); the adapted model
scores it again. Prints the share of predictions that changed, the inputs TLM selected (log-perplexity
above its threshold) and the accuracies. Usage:
    python benchmarks/tlm_moves.py --data-dir ../shared/data [--ns 32 128 512]
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.core.design import conditions
from harness.core.engine import models
from harness.core.engine.models import ModelSettings
from harness.core.plumbing.sections import Sections
from harness.core.plumbing.settings import Settings, option, parse_script
from harness.scoring import zero_shot
from harness.tasks.protocol import find_spec, subsample_docs
from harness.tasks.subsample import DataSettings, SampleSettings
from tapt import methods


@dataclass(kw_only=True)
class MovesOptions(Settings):
    """Which tasks and sizes."""

    MINIMUM = {"m": 1, "subsample": 0}

    tasks: list[str] = option(["ag_news", "rotten_tomatoes", "trec"], "tasks")
    ns: list[int] = option([32, 128, 512], "test sizes")
    m: int = option(8, "labeled train size of the subsample (the methods study's)")
    subsample: int = option(0, "which subsample")
    seed: int = option(0, "seed of the subsample and of training")
    eval_batch_size: int = option(16, "lm-eval scoring batch size")


class MovesArgs(Sections):
    """Where the data is, which base, and the script's own options."""

    SECTIONS = {"data": DataSettings, "model": ModelSettings, "options": MovesOptions}
    SMOKE = {"ns": [4], "tasks": ["rotten_tomatoes"]}


def predictions(frame) -> np.ndarray:
    return np.array([int(np.argmax(p)) for p in frame["probs"]])


def main() -> None:
    a = parse_script(MovesArgs, __doc__)
    o = a.options
    path = models.resolve(a.model.base)
    model, tokenizer = models.load_causal_lm(path), models.tokenizer(path)
    tlm = methods.find("test-time-learning")
    settings = tlm.settings()
    print(
        f"base {a.model.base}, TLM at its defaults {settings}, m {o.m}, subsample {o.subsample}, "
        f"seed {o.seed}"
    )
    print(
        f"{'task':16} {'n':>5} {'changed':>8} {'selected':>9} {'acc base':>9} {'acc TLM':>8} {'seconds':>8}"
    )
    for task in o.tasks:
        spec = find_spec(task)
        for n in o.ns:
            start = time.perf_counter()
            sample = SampleSettings(m=o.m, n=n, seed=o.seed, data_dir=a.data.data_dir)
            test = subsample_docs(spec, sample, o.subsample)[conditions.TEST]
            metadata = {"data_dir": a.data.data_dir, "m": o.m, "n": n, "seed": o.seed}
            metadata |= {"subsample": o.subsample, "split": conditions.TEST}
            scoring = zero_shot.lm_eval_task(spec, metadata, [], test)
            base = zero_shot.score(zero_shot.scorer(model, tokenizer, o.eval_batch_size), scoring)
            with tempfile.TemporaryDirectory() as work:
                unlabeled = test.drop(columns="label")
                inputs = methods.Inputs(model, tokenizer, spec, unlabeled, settings, o.seed, Path(work))
                adapted = tlm.run(inputs)
            after = zero_shot.score(zero_shot.scorer(adapted.model, tokenizer, o.eval_batch_size), scoring)
            model = adapted.base()
            changed = float((predictions(base) != predictions(after)).mean())
            rec = adapted.record
            print(
                f"{task:16} {n:5d} {changed:8.1%} {rec['selected']:4d}/{rec['seen']:<4d} "
                f"{base['correct'].mean():9.3f} {after['correct'].mean():8.3f} "
                f"{time.perf_counter() - start:8.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
