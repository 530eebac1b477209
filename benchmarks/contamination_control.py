"""Positive control for the test: contaminate a model with a labeled test subsample in canonical
order, then check the test flags it and not the base model.

The labeled examples are concatenated in their canonical order (as a contaminated pretraining
corpus would hold them), cut into blocks of --block tokens, and a LoRA adapter is trained on them
for --epochs. Usage:
    python benchmarks/contamination_control.py --data-dir ../shared/data --out control.json
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from contamination.exchangeability_run import SEPARATOR, ContaminationArgs, examples, sharded_test
from harness.core.engine.models import load_scoring_model, resolve
from harness.core.plumbing.settings import Settings, option, parse_script


@dataclass(kw_only=True)
class ContaminatingSettings(Settings):
    """How the model is contaminated: a LoRA adapter trained on the test subsample's labeled examples."""

    MINIMUM = {"epochs": 0.0, "lr": 0.0, "block": 8}

    epochs: float = option(8.0, "epochs of the contaminating LoRA training")
    lr: float = option(2e-3, "learning rate of the contaminating training")
    block: int = option(256, "tokens per training block of the concatenated corpus")


class ControlArgs(ContaminationArgs):
    """The test's settings with the defaults of the control run that passed (n 64, 16 shards, 8 epochs):
    ag_news's test rows of a subsample with m 4 (which sets only which rows are test) contaminate it."""

    SECTIONS = ContaminationArgs.SECTIONS | {"contaminating": ContaminatingSettings}
    TITLES = ContaminationArgs.TITLES | {"contaminating": "the contaminating training"}
    SMOKE = {"n": 8, "shards": 2, "permutations": 2, "epochs": 1.0, "block": 32}
    DEFAULTS = {"task": "ag_news", "m": 4, "n": 64, "shards": 16, "permutations": 20}
    DEFAULTS |= {"out": "positive_control.json"}


def contaminate(model, tokenizer, corpus: str, block: int, epochs: float, lr: float, seed: int):
    """Train a LoRA adapter on the corpus cut into blocks; returns the adapted model and its losses."""
    from datasets import Dataset
    from trl import SFTTrainer

    from harness.core.engine.training import StepLog
    from tapt.adapter import lora_config, sft_config

    ids = tokenizer(corpus)["input_ids"]
    blocks = [ids[i : i + block] for i in range(0, len(ids), block)]
    steps = StepLog()
    with tempfile.TemporaryDirectory() as work:
        trainer = SFTTrainer(
            model=model,
            args=sft_config(Path(work), epochs, lr, 8, block, seed),
            train_dataset=Dataset.from_dict({"input_ids": blocks}),
            processing_class=tokenizer,
            peft_config=lora_config(),
            callbacks=[steps],
        )
        trainer.train()
    return trainer.model.eval(), steps.losses, len(blocks)


def main() -> None:
    a = parse_script(ControlArgs, __doc__)
    sample, t, c = a.sample, a.test, a.contaminating
    spec, docs = sample.docs()
    items = examples(spec, docs, "labeled")
    model, tok = load_scoring_model(resolve(a.model.base))
    test = dict(
        shards=t.shards,
        permutations=t.permutations,
        context_len=t.context_len,
        stride=t.stride,
        seed=sample.seed,
        batch_size=t.batch_size,
    )
    start = time.perf_counter()
    base = sharded_test(model, tok, items, **test)
    t_base = time.perf_counter() - start
    start = time.perf_counter()
    corpus = SEPARATOR.join(items)
    model, losses, blocks = contaminate(model, tok, corpus, c.block, c.epochs, c.lr, sample.seed)
    t_train = time.perf_counter() - start
    start = time.perf_counter()
    contaminated = sharded_test(model, tok, items, **test)
    t_cont = time.perf_counter() - start
    report = {
        "task": sample.task,
        "n": sample.n,
        "S": t.shards,
        "P": t.permutations,
        "epochs": c.epochs,
        "lr": c.lr,
        "blocks": blocks,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "base_pval": base["pval"],
        "contaminated_pval": contaminated["pval"],
        "seconds": {"test_base": t_base, "train": t_train, "test_contaminated": t_cont},
        "base": base,
        "contaminated": contaminated,
    }
    Path(a.options.out).write_text(json.dumps(report, indent=1))
    print(
        f"{sample.task} n={sample.n} S={t.shards} P={t.permutations}: "
        f"base p={base['pval']:.4g} ({t_base:.0f} s), "
        f"contaminated ({c.epochs} epochs on {blocks} blocks, loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
        f"{t_train:.0f} s) p={contaminated['pval']:.4g} ({t_cont:.0f} s)"
    )


if __name__ == "__main__":
    main()
