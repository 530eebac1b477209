"""A test-time RL training run with TRL's own GRPOTrainer against the one that reads each prompt once
per group (`tapt.methods.test_time_rl.grpo_groups`), side by side on the same base, prompts, seed and
settings.

For each n, test-time RL adapts on one subsample's n test prompts of a task (the method's defaults: 8
samples a prompt, rollouts of 8 prompts, one step per prompt; `answers: free`, since TRL's own trainer
samples free text only), once with each trainer, from a freshly loaded base. Prints the optimizer
steps, the seconds of the whole `adapt` (sampling, scoring and updates), the seconds a step, the ratio
TRL/grouped, and the mean reward each run logged. Usage:
    python benchmarks/grpo_step.py --data-dir ../shared/data [--sizes 8 32] [--task ag_news]
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from harness.core.engine import models
from harness.core.engine.models import ModelSettings
from harness.core.plumbing.sections import Sections
from harness.core.plumbing.settings import Settings, option, parse_script
from harness.tasks.protocol import find_spec, subsample_docs
from harness.tasks.subsample import DataSettings, SampleSettings
from tapt import methods
from tapt.methods import test_time_rl


@dataclass(kw_only=True)
class GrpoBenchOptions(Settings):
    """Which task, sizes and seed."""

    MINIMUM = {"m": 1}

    task: str = option("ag_news", "task whose test prompts are trained on")
    sizes: list[int] = option([8, 32], "test prompts per run (n)")
    m: int = option(8, "labeled train size of the subsample (the methods study's)")
    seed: int = option(0, "seed of the subsample and of training")


class GrpoBenchArgs(Sections):
    """Where the data is, which base, and the script's own options."""

    SECTIONS = {"data": DataSettings, "model": ModelSettings, "options": GrpoBenchOptions}
    SMOKE = {"sizes": [8]}


def timed_run(a: GrpoBenchArgs, path, spec, docs, trainer_class) -> tuple[float, dict]:
    model, tokenizer = models.load_causal_lm(path), models.tokenizer(path)
    settings = test_time_rl.TtrlSettings(answers="free")  # TRL's own trainer samples free text only
    with tempfile.TemporaryDirectory() as work:
        x = methods.Inputs(model, tokenizer, spec, docs, settings, a.options.seed, Path(work))
        start = time.perf_counter()
        adapted = test_time_rl.adapt(x, trainer_class)
        return time.perf_counter() - start, adapted.record


def main() -> None:
    from trl import GRPOTrainer

    from tapt.methods.test_time_rl.grpo_groups import GroupedGRPOTrainer

    a = parse_script(GrpoBenchArgs, __doc__)

    o = a.options
    path = models.resolve(a.model.base)
    spec = find_spec(o.task)
    print(f"base {a.model.base}, task {o.task}, torch threads {torch.get_num_threads()}, seed {o.seed}")
    print(
        f"{'n':>3} {'trainer':8} {'steps':>5} {'seconds':>8} {'s/step':>7} {'ratio':>6} {'mean reward':>11}"
    )
    for n in o.sizes:
        sample = SampleSettings(m=o.m, n=n, seed=o.seed, data_dir=a.data.data_dir)
        docs = subsample_docs(spec, sample, 0)["test"].drop(columns="label")
        seconds = {}
        for name, cls in (("TRL", GRPOTrainer), ("grouped", GroupedGRPOTrainer)):
            spent, record = timed_run(a, path, spec, docs, cls)
            seconds[name] = spent
            steps = record["steps"]
            reward = sum(record["mean_reward"]) / max(len(record["mean_reward"]), 1)
            ratio = f"{seconds['TRL'] / spent:6.2f}" if name == "grouped" else ""
            print(
                f"{n:3} {name:8} {steps:5} {spent:8.1f} {spent / steps:7.2f} {ratio:>6} {reward:11.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
