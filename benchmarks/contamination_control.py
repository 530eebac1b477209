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
from harness.core.plumbing.settings import option, parse_script


@dataclass(kw_only=True)
class ControlArgs(ContaminationArgs):
    """The test's settings with the defaults of the control run that passed (n 64, 16 shards, 8 epochs)."""

    MINIMUM = {"epochs": 0.0, "lr": 0.0, "block": 8}
    SMOKE = {"n": 8, "shards": 2, "permutations": 2, "epochs": 1.0, "block": 32}

    task: str = option("ag_news", "task whose labeled test subsample contaminates the model")
    m: int = option(4, "train size of the subsample (only sets which rows are test)")
    n: int = option(64, "examples in the contaminating test subsample")
    shards: int = option(16, "number of contiguous shards")
    permutations: int = option(20, "random orders scored per shard")
    epochs: float = option(8.0, "epochs of the contaminating LoRA training")
    lr: float = option(2e-3, "learning rate of the contaminating training")
    block: int = option(256, "tokens per training block of the concatenated corpus")
    out: str | None = option("positive_control.json", "write the report JSON here")


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
    spec, docs = a.docs()
    items = examples(spec, docs, "labeled")
    model, tok = load_scoring_model(resolve(a.base))
    test = dict(
        shards=a.shards,
        permutations=a.permutations,
        context_len=a.context_len,
        stride=a.stride,
        seed=a.seed,
        batch_size=a.batch_size,
    )
    start = time.perf_counter()
    base = sharded_test(model, tok, items, **test)
    t_base = time.perf_counter() - start
    start = time.perf_counter()
    model, losses, blocks = contaminate(model, tok, SEPARATOR.join(items), a.block, a.epochs, a.lr, a.seed)
    t_train = time.perf_counter() - start
    start = time.perf_counter()
    contaminated = sharded_test(model, tok, items, **test)
    t_cont = time.perf_counter() - start
    report = {
        "task": a.task,
        "n": a.n,
        "S": a.shards,
        "P": a.permutations,
        "epochs": a.epochs,
        "lr": a.lr,
        "blocks": blocks,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "base_pval": base["pval"],
        "contaminated_pval": contaminated["pval"],
        "seconds": {"test_base": t_base, "train": t_train, "test_contaminated": t_cont},
        "base": base,
        "contaminated": contaminated,
    }
    Path(a.out).write_text(json.dumps(report, indent=1))
    print(
        f"{a.task} n={a.n} S={a.shards} P={a.permutations}: base p={base['pval']:.4g} ({t_base:.0f} s), "
        f"contaminated ({a.epochs} epochs on {blocks} blocks, loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
        f"{t_train:.0f} s) p={contaminated['pval']:.4g} ({t_cont:.0f} s)"
    )


if __name__ == "__main__":
    main()
