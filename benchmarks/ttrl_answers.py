"""What test-time RL's samples say, free text against samples drawn among the answer choices, on the
base's own samples (a rollout before any update).

For each task, the base samples `samples` completions for each of one subsample's test prompts at
temperature 1.0, twice: as free text of the longest choice's tokens plus one (`answers: free`), and
among the prompt's choices, each then ended (`answers: choices`, the default, as its trainer samples).
Each completion is read as the first choice it names. Prints the share of samples naming no choice, the
share of prompt groups whose samples earn different rewards against their vote (the groups GRPO can
learn from), the share of free-text groups that the authors' vote (no answer counted as one:
`non_answers_vote`) gives to "no answer", and the votes' class balance beside the gold labels'. Usage:
    python benchmarks/ttrl_answers.py --data-dir ../shared/data [--tasks ag_news rotten_tomatoes trec]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from harness.core.engine import models
from harness.core.engine.models import ModelSettings
from harness.core.plumbing.sections import Sections
from harness.core.plumbing.settings import Settings, option, parse_script
from harness.tasks.protocol import find_spec, subsample_docs
from harness.tasks.subsample import DataSettings, SampleSettings
from tapt.methods.test_time_rl.grpo_groups import on_answers
from tapt.methods.test_time_rl.votes import answer, choice_tokens, vote


@dataclass(kw_only=True)
class AnswerBenchOptions(Settings):
    """Which tasks, sizes and samples."""

    MINIMUM = {"m": 1, "n": 1, "samples": 2, "subsample": 0}

    tasks: list[str] = option(["ag_news", "rotten_tomatoes", "trec"], "tasks whose test prompts are sampled")
    m: int = option(8, "labeled train size of the subsample (the methods study's)")
    n: int = option(32, "test prompts per task")
    samples: int = option(8, "completions per prompt (test-time RL's default)")
    subsample: int = option(0, "which subsample's test split")
    seed: int = option(0, "seed of the subsample and of sampling")


class AnswerBenchArgs(Sections):
    """Where the data is, which base, and the script's own options."""

    SECTIONS = {"data": DataSettings, "model": ModelSettings, "options": AnswerBenchOptions}
    SMOKE = {"n": 4, "samples": 2, "tasks": ["rotten_tomatoes"]}


def balance(labels: list[int | None], k: int) -> str:
    """Share of each class among the labels that exist, in class order."""
    shown = [x for x in labels if x is not None]
    counts = np.bincount(shown, minlength=k) / max(len(shown), 1)
    return "/".join(f"{100 * c:.0f}" for c in counts)


def sample(model, tokenizer, prompts, samples: int, new_tokens: int, answers=None) -> list[list[str]]:
    """`samples` completions of each prompt at temperature 1; with `answers` ({prompt ids: choice tokens},
    test-time RL's default) each stays on one of the prompt's choices, then ends, as its trainer samples."""
    out = []
    for prompt in prompts:
        ids = tokenizer(text=prompt, return_tensors="pt")
        width = ids["input_ids"].shape[1]
        keep = {}
        if answers is not None:
            rows = [answers[tuple(ids["input_ids"][0].tolist())]] * samples
            keep["prefix_allowed_tokens_fn"] = on_answers(rows, width, tokenizer.eos_token_id)
        with torch.no_grad():
            gen = model.generate(
                **ids,
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                max_new_tokens=new_tokens,
                num_return_sequences=samples,
                pad_token_id=tokenizer.pad_token_id,
                **keep,
            )
        out.append(tokenizer.batch_decode(gen[:, width:], skip_special_tokens=True))
    return out


def teaching(groups: list[list[int | None]]) -> float:
    """Share of prompt groups whose samples earn different rewards against their vote (nonzero advantage)."""
    return float(np.mean([len({a is not None and a == vote(g) for a in g}) > 1 for g in groups]))


def main() -> None:
    a = parse_script(AnswerBenchArgs, __doc__)
    o = a.options
    path = models.resolve(a.model.base)
    model, tokenizer = models.load_causal_lm(path).eval(), models.tokenizer(path)
    print(
        f"base {a.model.base}, n {o.n}, {o.samples} samples a prompt, subsample {o.subsample}, seed {o.seed}"
    )
    print(
        f"{'task':16} {'unmatched free':>14} {'choices':>8} {'groups that teach free':>22} {'choices':>8} "
        f"{'no answer wins (free)':>21} {'votes free':>16} {'choices':>16} {'gold':>16}"
    )
    for task in o.tasks:
        spec = find_spec(task)
        sample_settings = SampleSettings(m=o.m, n=o.n, seed=o.seed, data_dir=a.data.data_dir)
        docs = subsample_docs(spec, sample_settings, o.subsample)["test"]
        choices = [list(c) for c in docs["choices"]]
        prompts = list(docs["prompt"])
        longest = max(len(tokenizer(spec.target_delimiter + c)["input_ids"]) for cs in choices for c in cs)
        answers = choice_tokens(tokenizer, prompts, choices, spec.target_delimiter)
        read = {}
        for mode, given in (("free", None), ("choices", answers)):
            torch.manual_seed(o.seed)
            completions = sample(model, tokenizer, prompts, o.samples, longest + 1, given)
            read[mode] = [[answer(c, cs) for c in group] for group, cs in zip(completions, choices)]
        k, total = max(len(cs) for cs in choices), len(prompts) * o.samples
        unmatched = {m: 100 * sum(g.count(None) for g in r) / total for m, r in read.items()}
        teach = {m: 100 * teaching(r) for m, r in read.items()}
        votes = {m: balance([vote(g) for g in r], k) for m, r in read.items()}
        silent = [vote(g, non_answers_vote=True) is None for g in read["free"]]  # the authors' vote
        print(
            f"{task:16} {unmatched['free']:13.1f}% {unmatched['choices']:7.1f}% {teach['free']:21.1f}% "
            f"{teach['choices']:7.1f}% {f'{sum(silent)} of {len(silent)}':>21} {votes['free']:>16} "
            f"{votes['choices']:>16} "
            f"{balance(list(docs['label'].astype(int)), k):>16}",
            flush=True,
        )


if __name__ == "__main__":
    main()
