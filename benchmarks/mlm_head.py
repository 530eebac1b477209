"""What the encoder's missing MLM head does to masked-LM TAPT: all-MiniLM-L6-v2 ships no MLM head, so
TAPT starts one whose decoder is tied to the word embeddings (trained) and whose transform (dense +
LayerNorm) and output bias are new. This script runs TAPT as a unit's extra condition does (the
study's recipe: lr 1e-4, 2 epochs, batch 16, 15% masking) twice on the same texts: from the new head
(as the grid runs it), and from a head first fitted alone for --warm steps with the encoder frozen (a
reference that no run uses). Per task it prints the MLM loss at the first and last step and how far
the encoder moved (||delta|| / ||weights||, the head left out).

    python benchmarks/mlm_head.py --data-dir ../shared/data [--tasks ag_news trec] [--seed 7]
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.core.plumbing.settings import Settings, option, parse_script  # noqa: E402


def encoder_delta(before, after):
    """after - before over the encoder's weights (the `bert.` parameters), as one vector, and how far
    it moved: ||delta|| / ||before||."""
    import torch

    names = [n for n in before if n.startswith("bert.")]
    delta = torch.cat([(after[n] - before[n]).double().flatten() for n in names])
    size = torch.cat([before[n].double().flatten() for n in names]).norm()
    return delta, float(delta.norm() / size)


def warmed_head(base: str, texts: list[str], steps: int, seed: int, out: Path) -> str:
    """A copy of `base` with its MLM head fitted alone (encoder frozen) for `steps` steps on `texts`."""
    import torch
    from transformers import AutoModelForMaskedLM, set_seed

    from harness.core.engine import models
    from tapt.methods.raw_text.pretrain import collator

    set_seed(seed)
    tokenizer = models.tokenizer(base)
    model = AutoModelForMaskedLM.from_pretrained(base, dtype=torch.float32)
    for name, p in model.named_parameters():
        p.requires_grad = name.startswith("cls.") and "decoder.weight" not in name
    ids = tokenizer(texts, truncation=True, max_length=models.MAX_LENGTH)["input_ids"]
    collate = collator(tokenizer, decoder=False)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    model.train()
    for step in range(steps):
        batch = collate([{"input_ids": ids[(step * 16 + i) % len(ids)]} for i in range(16)])
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return str(out)


def tapt(base: str, texts: list[str], seed: int):
    """The unit's TAPT of `base` on `texts`: its step losses, the encoder's delta and how far it moved."""
    import torch
    from transformers import AutoModelForMaskedLM

    from tapt.methods.raw_text.pretrain import TextSettings, pretrain

    before = {k: v.clone() for k, v in AutoModelForMaskedLM.from_pretrained(base).state_dict().items()}
    with tempfile.TemporaryDirectory() as out:
        record = pretrain(base, [(t, "") for t in texts], TextSettings(pretrain_lr=1e-4), seed, Path(out))
        after = AutoModelForMaskedLM.from_pretrained(out, dtype=torch.float32).state_dict()
    return (record["losses"], *encoder_delta(before, after))


@dataclass(kw_only=True)
class HeadArgs(Settings):
    SMOKE = {"tasks": ["ag_news"], "warm": 2}
    MINIMUM = {"warm": 1}

    data_dir: str = option(help="folder of <task>/data.parquet (../shared/data)")
    tasks: list[str] = option(["ag_news", "rotten_tomatoes", "trec", "emotion", "enron_spam"], "tasks")
    seed: int = option(7, "the subsample's seed (never the plan's)")
    warm: int = option(100, "steps the reference head is fitted alone")


def main(argv: list[str] | None = None) -> None:
    args = parse_script(HeadArgs, __doc__, argv)

    from harness.core.engine import models
    from harness.tasks.protocol import find_spec, subsample_docs
    from harness.tasks.subsample import SampleSettings

    base = models.resolve("all-MiniLM-L6-v2")
    print("task                 head     loss first  loss last  encoder moved  cosine to the fitted head's")
    for slug in args.tasks:
        sample = SampleSettings(m=50, n=50, seed=args.seed, data_dir=args.data_dir)
        texts = list(subsample_docs(find_spec(slug), sample, 0)["extra"]["text"])
        with tempfile.TemporaryDirectory() as work:
            warmed = warmed_head(base, texts, args.warm, args.seed, Path(work) / "warm")
            runs = {
                name: tapt(start, texts, args.seed) for name, start in (("new", base), ("fitted", warmed))
            }
            reference = runs["fitted"][1]
            for name, (losses, delta, moved) in runs.items():
                cosine = float(delta @ reference / (delta.norm() * reference.norm()))
                print(f"{slug:20} {name:7} {losses[0]:11.2f} {losses[-1]:10.2f} {moved:14.2e} {cosine:11.3f}")


if __name__ == "__main__":
    main()
