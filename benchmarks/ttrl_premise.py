"""Where test-time RL's premise holds: the majority vote of a model's samples is right more often than its
own greedy answer (TTRL rewards agreement with that vote). Before any training, on the base alone.

For each offline generative task, each temperature and each answer budget, the base answers every
document of one draw (n documents of test, seed --seed, a seed no plan uses) greedily once, and samples
the largest --samples count of completions; maj@N for a smaller N reads the first N of them. Every answer
is read by TTRL's rule (harness.tasks.generative.math_answer) and compared with the gold one as numbers.
Prints, per task and setting: maj@N, greedy (pass@1), one sample's mean accuracy, the share of tied votes
and of unreadable samples, and maj@N - greedy with its 95% interval (a paired bootstrap over documents).

The rule that picks the ground, fixed here before any bias was read: the (task, setting) whose maj@N -
greedy is largest among those whose interval lies above 0. Where none does, there is no ground on this
model, and the script says so.

    python benchmarks/ttrl_premise.py [--n 64] [--samples 8 16] [--temperatures 1.0 0.7] [--budgets 16 64] \
        [--records studies/ttrl_premise/answers.json]
    python benchmarks/ttrl_premise.py --from-records studies/ttrl_premise/answers.json
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.core.engine.models import ModelSettings  # noqa: E402
from harness.core.plumbing.settings import option, parse_script  # noqa: E402


@dataclass(kw_only=True)
class PremiseArgs(ModelSettings):
    SMOKE = {"n": 4, "samples": [2, 4], "temperatures": [1.0], "budgets": [16]}
    MINIMUM = {"n": 1, "m": 1, "batch": 1}

    tasks: list[str] = option(["arithmetic"], "generative tasks (the offline one: arithmetic)")
    n: int = option(64, "documents of test a task")
    m: int = option(8, "train size of the draw (train is not read)")
    seed: int = option(20261208, "the draw's and the sampling's seed (no plan uses it)")
    samples: list[int] = option([8, 16], "samples voted (maj@N), each a prefix of the largest")
    temperatures: list[float] = option([1.0, 0.7], "sampling temperatures")
    budgets: list[int] = option([16, 64], "the answer's token budget (the task's max_gen_toks is 16)")
    batch: int = option(8, "prompts generated together")
    resamples: int = option(10_000, "bootstrap resamples of the interval")
    records: str | None = option(None, "write every answer read (the table's inputs) to this JSON file")
    from_records: str | None = option(
        None, "print the table from a records file a run wrote (no model is loaded): recomputes it"
    )


def greedy(model, tokenizer, prompts: list[str], budget: int, until, batch: int) -> list[str]:
    from harness.core.engine.generation import generate

    return generate(model, tokenizer, prompts, budget, until, batch)


def sampled(model, tokenizer, prompts, count: int, temperature: float, budget: int, until, batch: int):
    """`count` completions of each prompt at `temperature`, cut at the stop strings: [[text, ...], ...]."""
    import torch

    side, out = tokenizer.padding_side, []
    tokenizer.padding_side = "left"
    try:
        for start in range(0, len(prompts), batch):
            enc = tokenizer(prompts[start : start + batch], return_tensors="pt", padding=True)
            with torch.no_grad():
                ids = model.generate(
                    **enc,
                    do_sample=True,
                    temperature=temperature,
                    top_k=0,
                    top_p=1.0,
                    num_return_sequences=count,
                    max_new_tokens=budget,
                    pad_token_id=tokenizer.pad_token_id,
                    stop_strings=list(until) or None,
                    tokenizer=tokenizer,
                )
            texts = tokenizer.batch_decode(ids[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
            out += [texts[i : i + count] for i in range(0, len(texts), count)]
    finally:
        tokenizer.padding_side = side
    return out


def vote(answers: list) -> tuple[object, bool]:
    """TTRL's vote: the most common answer, first sampled on a tie ('' for no answer counts, as theirs);
    and whether it was a tie."""
    top = Counter("" if a is None else a for a in answers).most_common(2)
    return top[0][0] or None, len(top) == 2 and top[0][1] == top[1][1]


def interval(diff: np.ndarray, resamples: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(resamples, len(diff)))].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def shown(r: dict) -> str:
    """One row of the table."""
    return (
        f"| {r['task']} | {r['setting']} | {r['maj']:.1%} | {r['greedy']:.1%} | {r['one']:.1%} | "
        f"{r['ties']:.0%} | {r['unreadable']:.0%} | {100 * r['diff']:+.1f} [{100 * r['low']:+.1f}, "
        f"{100 * r['high']:+.1f}] pts | {r['docs']} |"
    )


def measure(a: PremiseArgs) -> dict:
    """The base's answers, as TTRL's rule reads them: per task its documents' rows and gold answers, per
    budget the greedy answer to each, and per (budget, temperature) the largest --samples count of sampled
    answers to each. Everything the table is computed from (`table`)."""
    import torch
    from transformers import set_seed

    from harness.core.engine import models
    from harness.tasks.generative import math_answer
    from harness.tasks.protocol import find_spec, subsample_docs
    from harness.tasks.subsample import SampleSettings

    model, tokenizer = models.load_scoring_model(models.resolve(a.base))
    model.eval()
    out = {"base": a.base, "n": a.n, "m": a.m, "seed": a.seed, "samples": sorted(a.samples), "tasks": {}}
    for task in a.tasks:
        spec = find_spec(task)
        how = spec.answering
        docs = subsample_docs(spec, SampleSettings(m=a.m, n=a.n, seed=a.seed), 0)["test"]
        prompts = list(docs["prompt"])
        found = {"rows": [int(r) for r in docs["row"]], "gold": [str(c[0]).strip() for c in docs["choices"]]}
        found |= {"greedy": {}, "sampled": {}}
        for budget in a.budgets:
            texts = greedy(model, tokenizer, prompts, budget, how.until, a.batch)
            found["greedy"][str(budget)] = [math_answer(how.cut(t)) for t in texts]
            for temperature in a.temperatures:
                set_seed(a.seed)
                torch.manual_seed(a.seed)
                texts = sampled(
                    model, tokenizer, prompts, max(a.samples), temperature, budget, how.until, a.batch
                )
                answers = [[math_answer(how.cut(t)) for t in group] for group in texts]
                found["sampled"][f"{budget}/{temperature:g}"] = answers
                print(f"measured {task} budget {budget} T {temperature:g}", file=sys.stderr, flush=True)
        out["tasks"][task] = found
    return out


def table(records: dict, resamples: int) -> list[dict]:
    """The table's rows from the recorded answers: per task and setting, maj@N, greedy, one sample's mean,
    ties, unreadable samples, and maj@N - greedy with its 95% interval (a paired bootstrap over
    documents, seeded by the records' seed)."""
    from harness.tasks.generative import equivalent

    rows = []
    for task, found in records["tasks"].items():
        gold = found["gold"]
        for key, answers in found["sampled"].items():
            budget, temperature = key.split("/")
            first = found["greedy"][budget]
            right_greedy = np.array([equivalent(x, g) for x, g in zip(first, gold)], float)
            for count in records["samples"]:
                votes = [vote(group[:count]) for group in answers]
                right_vote = np.array([equivalent(v, g) for (v, _), g in zip(votes, gold)], float)
                one = np.mean([equivalent(x, g) for group, g in zip(answers, gold) for x in group[:count]])
                diff = right_vote - right_greedy
                low, high = interval(diff, resamples, records["seed"])
                rows.append(
                    {
                        "task": task,
                        "setting": f"N {count}, T {temperature}, budget {budget}",
                        "maj": right_vote.mean(),
                        "greedy": right_greedy.mean(),
                        "one": one,
                        "ties": np.mean([t for _, t in votes]),
                        "unreadable": np.mean([x is None for group in answers for x in group[:count]]),
                        "diff": diff.mean(),
                        "low": low,
                        "high": high,
                        "docs": len(gold),
                    }
                )
    return rows


def printed(records: dict, rows: list[dict]) -> str:
    """The table and the ground the rule picks, as printed."""
    lines = [
        f"base {records['base']}; {records['n']} documents of test a task, seed {records['seed']}; every "
        "answer by TTRL's rule\n",
        "| task | setting | maj@N | greedy | one sample | ties | unreadable | maj@N - greedy [95%] | docs |",
        "|---|---|---|---|---|---|---|---|---|",
        *(shown(r) for r in rows),
    ]
    ground = [r for r in rows if r["low"] > 0]
    if not ground:
        lines.append(
            "\nno ground: at no setting tried is maj@N above greedy with its 95% interval above 0; the "
            "premise does not hold on this model, and no confirmatory row is run"
        )
    else:
        best = max(ground, key=lambda r: r["diff"])
        lines.append(
            f"\nground (the widest margin whose interval is above 0): {best['task']}, {best['setting']}"
        )
    return "\n".join(lines)


def main(a: PremiseArgs) -> None:
    import json

    if a.from_records:
        records = json.loads(Path(a.from_records).read_text())
    else:
        records = measure(a)
        if a.records:
            Path(a.records).parent.mkdir(parents=True, exist_ok=True)
            Path(a.records).write_text(json.dumps(records))
    print(printed(records, table(records, a.resamples)))


if __name__ == "__main__":
    main(parse_script(PremiseArgs, __doc__))
