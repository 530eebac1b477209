"""Positive control for the test: contaminate a model with a labeled test subsample in canonical
order, then check the test flags it and not the base model.

The labeled examples are concatenated in their canonical order (as a contaminated pretraining
corpus would hold them), cut into blocks of --block tokens, and a LoRA adapter is trained on them
for --epochs. Usage:
    python -m contamination.positive_control --data-dir ../shared/data --out control.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from contamination.run import SEPARATOR, examples, load_model, sharded_test
from harness.docs import subsample_docs
from harness.models import resolve
from harness.spec import load_spec


def contaminate(model, tokenizer, corpus: str, block: int, epochs: float, lr: float, seed: int):
    """Train a LoRA adapter on the corpus cut into blocks; returns the adapted model and its losses."""
    from datasets import Dataset
    from trl import SFTTrainer

    from tapt.adapter import lora_config, sft_config
    from tapt.record import StepLog

    ids = tokenizer(corpus)["input_ids"]
    blocks = [ids[i : i + block] for i in range(0, len(ids), block)]
    steps = StepLog()
    with tempfile.TemporaryDirectory() as work:
        trainer = SFTTrainer(model=model, args=sft_config(Path(work), epochs, lr, 8, block, seed),
                             train_dataset=Dataset.from_dict({"input_ids": blocks}), processing_class=tokenizer,
                             peft_config=lora_config(), callbacks=[steps])
        trainer.train()
    return trainer.model.eval(), steps.losses, len(blocks)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pretrained", default="SmolLM2-135M-Instruct")
    p.add_argument("--task", default="ag_news")
    p.add_argument("--data-dir", default="../shared/data")
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--shards", type=int, default=16)
    p.add_argument("--permutations", type=int, default=20)
    p.add_argument("--epochs", type=float, default=8)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--block", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="positive_control.json")
    a = p.parse_args()
    spec = load_spec(a.task)
    items = examples(spec, subsample_docs(spec, a.data_dir, n=a.n, m=len(spec.classes))["test"], "labeled")
    model, tok = load_model(resolve(a.pretrained), None)
    test = dict(shards=a.shards, permutations=a.permutations, context_len=1024, stride=512, seed=a.seed)
    start = time.perf_counter()
    base = sharded_test(model, tok, items, **test)
    t_base = time.perf_counter() - start
    start = time.perf_counter()
    model, losses, blocks = contaminate(model, tok, SEPARATOR.join(items), a.block, a.epochs, a.lr, a.seed)
    t_train = time.perf_counter() - start
    start = time.perf_counter()
    contaminated = sharded_test(model, tok, items, **test)
    t_cont = time.perf_counter() - start
    report = {"task": a.task, "n": a.n, "S": a.shards, "P": a.permutations, "epochs": a.epochs, "lr": a.lr,
              "blocks": blocks, "loss_first": losses[0], "loss_last": losses[-1],
              "base_pval": base["pval"], "contaminated_pval": contaminated["pval"],
              "seconds": {"test_base": t_base, "train": t_train, "test_contaminated": t_cont},
              "base": base, "contaminated": contaminated}
    Path(a.out).write_text(json.dumps(report, indent=1))
    print(f"{a.task} n={a.n} S={a.shards} P={a.permutations}: base p={base['pval']:.4g} ({t_base:.0f} s), "
          f"contaminated ({a.epochs} epochs on {blocks} blocks, loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
          f"{t_train:.0f} s) p={contaminated['pval']:.4g} ({t_cont:.0f} s)")


if __name__ == "__main__":
    main()
