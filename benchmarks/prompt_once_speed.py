"""lm-eval's `hf` against `hf-prompt-once` in one process, on one loaded model: per task, each model
scores the grid's test docs of subsample 0 through lm-eval's `evaluate` (the grid's call), repeats
interleaved (which model goes first alternates). Prints the median wall times, their ratio, the largest
log-likelihood difference over every (doc, choice) and how many docs get the same prediction and the
same acc; and `whole s`: `hf-prompt-once` with every context run whole (`share_prefix` off: the
instruction its batch shares read again per document), with its ratio to `hf-prompt-once`. Usage:
    python benchmarks/prompt_once_speed.py --data-dir ../shared/data [--n 32 --repeats 3 --tasks trec,massive]
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from compare_log_samples import agreement  # the sibling script (benchmarks/ is on sys.path)

from harness.core.engine import models
from harness.core.plumbing.settings import option, parse_script, pick
from harness.scoring.prompt_once import PromptOnceLM
from harness.scoring.zero_shot import lm_eval_task
from harness.tasks.protocol import subsample_docs
from harness.tasks.spec import load_spec
from harness.tasks.subsample import SampleSettings

TASKS = (
    "trec,ag_news,rotten_tomatoes,massive,emotion,craigslist_bargains,climate_fever,amazon_counterfactual_en"
)


@dataclass(kw_only=True)
class SpeedArgs(SampleSettings):
    """The tasks, the scoring batch and the repeats."""

    SMOKE = {"tasks": "trec", "n": 4, "repeats": 1}

    base: str = option(models.SMOLLM2, "model dir or embedded default")
    tasks: str = option(TASKS, "comma-separated task slugs (the demo's three first)")
    n: int = option(32, "test docs scored per task (subsample 0)")
    m: int = option(8, "train size of the subsample, at least the classes (it only sets which rows are test)")
    batch_size: int = option(8, "lm-eval batch size, for both models")
    repeats: int = option(3, "timed runs of each model per task, interleaved")


def run(lm, task) -> tuple[list, float]:
    from lm_eval.evaluator import evaluate

    start = time.perf_counter()
    out = evaluate(
        lm, task.tasks, samples=task.samples, log_samples=True, bootstrap_iters=0, verbosity="ERROR"
    )
    (samples,) = out["samples"].values()
    return sorted(samples, key=lambda s: s["doc_id"]), time.perf_counter() - start


def main() -> None:
    from lm_eval.models.huggingface import HFLM

    a = parse_script(SpeedArgs, __doc__)
    model, tok = models.load_scoring_model(models.resolve(a.base))
    lms = {
        "hf": HFLM(pretrained=model, tokenizer=tok, batch_size=a.batch_size),
        "hf-prompt-once": PromptOnceLM(pretrained=model, tokenizer=tok, batch_size=a.batch_size),
        "whole": PromptOnceLM(pretrained=model, tokenizer=tok, batch_size=a.batch_size),
    }
    lms["whole"].share_prefix = False
    print(f"{a.base}, {a.n} test docs per task, batch {a.batch_size}, {a.repeats} interleaved repeats")
    head = f"{'task':<26}{'classes':>8}{'tokens':>8}{'hf s':>8}{'once s':>8}{'ratio':>7}{'max |dll|':>11}"
    print(head + "  same pred / acc  whole s  ratio")
    for slug in a.tasks.split(","):
        spec = load_spec(slug)
        design = pick(a, SampleSettings) | {"m": max(a.m, len(spec.classes))}  # a train row per class
        test = subsample_docs(spec, SampleSettings(**design), 0)["test"]
        metadata = {**design, "subsample": 0, "split": "test"}  # as the grid's units
        task = lm_eval_task(spec, metadata, [], test)
        times = {name: [] for name in lms}
        samples = {}
        for r in range(a.repeats):
            for name in list(lms)[:: 1 if r % 2 == 0 else -1]:
                samples[name], seconds = run(lms[name], task)
                times[name].append(seconds)
        g = agreement(samples["hf"], samples["hf-prompt-once"])
        tokens = max(len(tok(spec.target_delimiter + c)["input_ids"]) for c in spec.classes)
        t_hf, t_once, t_whole = (statistics.median(times[name]) for name in lms)
        w = agreement(samples["whole"], samples["hf-prompt-once"])
        assert w["same_pred"] == w["docs"], f"{slug}: a prediction moved with the shared prefix: {w}"
        print(
            f"{slug:<26}{len(spec.classes):>8}{tokens:>8}{t_hf:>8.2f}{t_once:>8.2f}{t_hf / t_once:>7.2f}"
            f"{g['max_diff']:>11.1e}  {g['same_pred']}/{g['docs']} {g['same_acc']}/{g['docs']}"
            f"{t_whole:>9.2f}{t_whole / t_once:>7.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
