"""How test-time RL reads its samples, before and after the answer and tie rules changed, on the base's
own samples (a rollout before any update).

For each task, the base samples `samples` completions for each of one subsample's test prompts, as
TRL's GRPOTrainer would (temperature 1.0, the longest choice's tokens plus one). Each completion is read
by the old rule (a choice must start it) and the new one (the first choice it names, as a whole word),
and each prompt's group voted by the old tie rule (the lowest choice index) and the new one (the answer
sampled first). Prints the share of samples naming no choice, the share of votes decided by a tie, and
the pseudo-labels' class balance under each rule beside the gold labels'. Usage:
    python benchmarks/ttrl_answers.py --data-dir ../shared/data [--tasks ag_news rotten_tomatoes trec]
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch

from harness.core import models
from harness.core.models import ModelSettings
from harness.core.settings import option, parse_script
from harness.tasks.protocol import find_spec, subsample_docs
from harness.tasks.subsample import DataSettings, SampleSettings
from tapt.methods.test_time_rl import answer, tied, vote


@dataclass(kw_only=True)
class AnswerBenchArgs(DataSettings, ModelSettings):
    """Which tasks, sizes and samples."""

    MINIMUM = {"m": 1, "n": 1, "samples": 2, "subsample": 0}
    SMOKE = {"n": 4, "samples": 2, "tasks": ["rotten_tomatoes"]}

    tasks: list[str] = option(["ag_news", "rotten_tomatoes", "trec"], "tasks whose test prompts are sampled")
    m: int = option(8, "labeled train size of the subsample (the methods study's)")
    n: int = option(32, "test prompts per task")
    samples: int = option(8, "completions per prompt (test-time RL's default)")
    subsample: int = option(0, "which subsample's test split")
    seed: int = option(0, "seed of the subsample and of sampling")


def starts_with(completion: str, choices: list[str]) -> int | None:
    """The old rule: the choice the completion starts with (the longest that fits)."""
    text = completion.strip().lower()
    fits = [i for i, c in enumerate(choices) if c.strip() and text.startswith(c.strip().lower())]
    return max(fits, key=lambda i: len(choices[i])) if fits else None


def lowest_on_tie(answers: list[int | None]) -> int | None:
    """The old vote: the most common answer, ties to the lowest choice index."""
    counts = Counter(a for a in answers if a is not None)
    return min(counts, key=lambda a: (-counts[a], a)) if counts else None


def balance(labels: list[int | None], k: int) -> str:
    """Share of each class among the labels that exist, in class order."""
    shown = [x for x in labels if x is not None]
    counts = np.bincount(shown, minlength=k) / max(len(shown), 1)
    return "/".join(f"{100 * c:.0f}" for c in counts)


def sample(model, tokenizer, prompts: list[str], samples: int, new_tokens: int) -> list[list[str]]:
    out = []
    for prompt in prompts:
        ids = tokenizer(prompt, return_tensors="pt")
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
            )
        out.append(tokenizer.batch_decode(gen[:, ids["input_ids"].shape[1] :], skip_special_tokens=True))
    return out


def main() -> None:
    a = parse_script(AnswerBenchArgs, __doc__)
    path = models.resolve(a.base)
    model, tokenizer = models.load_causal_lm(path).eval(), models.tokenizer(path)
    print(f"base {a.base}, n {a.n}, {a.samples} samples a prompt, subsample {a.subsample}, seed {a.seed}")
    print(
        f"{'task':16} {'unmatched old':>13} {'new':>6} {'tied old':>9} {'new':>6} "
        f"{'votes old':>16} {'new':>16} {'gold':>16}"
    )
    for task in a.tasks:
        spec = find_spec(task)
        sample_settings = SampleSettings(m=a.m, n=a.n, seed=a.seed, data_dir=a.data_dir)
        docs = subsample_docs(spec, sample_settings, a.subsample)["test"]
        choices = [list(c) for c in docs["choices"]]
        longest = max(len(tokenizer(spec.target_delimiter + c)["input_ids"]) for cs in choices for c in cs)
        torch.manual_seed(a.seed)
        completions = sample(model, tokenizer, list(docs["prompt"]), a.samples, longest + 1)
        old = [[starts_with(c, cs) for c in group] for group, cs in zip(completions, choices)]
        new = [[answer(c, cs) for c in group] for group, cs in zip(completions, choices)]
        k = max(len(cs) for cs in choices)
        total = len(old) * a.samples
        print(
            f"{task:16} {100 * sum(g.count(None) for g in old) / total:12.1f}% "
            f"{100 * sum(g.count(None) for g in new) / total:5.1f}% "
            f"{100 * np.mean([tied(g) for g in old]):8.1f}% {100 * np.mean([tied(g) for g in new]):5.1f}% "
            f"{balance([lowest_on_tie(g) for g in old], k):>16} {balance([vote(g) for g in new], k):>16} "
            f"{balance(list(docs['label'].astype(int)), k):>16}",
            flush=True,
        )


if __name__ == "__main__":
    main()
