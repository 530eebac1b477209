"""An MLM head fitted to an encoder that ships none (all-MiniLM-L6-v2, a sentence encoder), so that
masked-LM TAPT starts where its objective is, not from a random head.

The encoder and its embeddings are frozen (the decoder's weights are the word embeddings, tied): only the
head's transform and its bias learn, on pool rows that no split of any unit of the run uses. Every
condition, base included, then starts from this checkpoint, and each keeps the base's pooler (an MLM
checkpoint saves none, and a classifier loaded from it would draw a new one: the boost would be a
pooler swap). Written once per (base, task, rows, seed) into the cache, staged and renamed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from pathlib import Path

from harness.core.engine import models

# the fit's recipe (the study fits no head: BERT ships one); a row's first FIT_LENGTH tokens, 15% masked
FIT_LENGTH, FIT_EPOCHS, FIT_LR, FIT_BATCH = 128, 4.0, 1e-3, 16
RECORD_NAME = "mlm_head.json"


def torch_module():
    """torch.nn.Module, imported when this module is (it is imported only where a head is fitted)."""
    import torch

    return torch.nn.Module


def cache_root() -> Path:
    return models.cache_dir().parent / "mlm_heads"


def fitted(base: str, texts: list[str], rows: list[int], seed: int, tag: str) -> tuple[str, dict]:
    """(the checkpoint's folder, its record): `base` with its MLM head fitted on `texts` (pool `rows`),
    the encoder frozen; made once per (base, tag, rows, seed) and read from the cache after."""
    key = json.dumps([str(base), tag, rows, seed, FIT_LENGTH, FIT_EPOCHS, FIT_LR, FIT_BATCH])
    folder = cache_root() / f"{tag}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    if not (folder / RECORD_NAME).is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            record = fit(base, texts, seed, stage)
            record |= {"rows": len(rows), "pool_rows": rows}
            (stage / RECORD_NAME).write_text(json.dumps(record, indent=1))
            try:
                os.rename(stage, folder)
            except OSError:  # another worker wrote the same fit first: the same bytes, keep it
                shutil.rmtree(stage, ignore_errors=True)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
    return str(folder), json.loads((folder / RECORD_NAME).read_text()) | {"checkpoint": folder.name}


def fit(base: str, texts: list[str], seed: int, out: Path) -> dict:
    """Fit the head of `base` on `texts`, the encoder frozen; save model, tokenizer and the base's pooler
    to `out`; the record: steps, first and final loss, ln of the vocabulary, the encoder unchanged."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForMaskedLM, Trainer, set_seed

    from harness.core.engine import training
    from tapt.methods.raw_text.pretrain import collator

    set_seed(seed)
    tokenizer = models.tokenizer(base)
    model = AutoModelForMaskedLM.from_pretrained(base, dtype=torch.float32)
    prefix = f"{model.base_model_prefix}."
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if n.startswith(prefix)}
    for name, param in model.named_parameters():
        param.requires_grad = not name.startswith(prefix)
    ids = tokenizer(texts, truncation=True, max_length=FIT_LENGTH)["input_ids"]
    steps = training.StepLog()
    args = training.arguments(out, FIT_EPOCHS, FIT_LR, FIT_BATCH, seed)
    Trainer(
        model=MaskedOnly(model) if head_of(model) is not None else model,
        args=args,
        train_dataset=Dataset.from_dict({"input_ids": ids}),
        data_collator=collator(tokenizer, decoder=False),
        callbacks=[steps],
    ).train()
    moved = [n for n, p in model.named_parameters() if n in frozen and not torch.equal(p, frozen[n])]
    if moved:
        raise RuntimeError(f"fitting {base}'s MLM head moved its encoder ({moved[0]}): nothing is kept")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    pooled = carry_pooler(base, out)
    summary = steps.summary()
    return {
        "base": str(base),
        "texts": len(texts),
        "trained": [n for n, p in model.named_parameters() if p.requires_grad],
        "encoder_unchanged": True,
        "pooler_from_base": pooled,
        "ln_vocabulary": math.log(len(tokenizer)),
        "first_loss": summary["losses"][0] if summary["losses"] else None,
        "recipe": {"max_length": FIT_LENGTH, "epochs": FIT_EPOCHS, "lr": FIT_LR, "batch": FIT_BATCH},
        **summary,
    }


def head_of(model):
    """The MLM head module of a masked LM (BERT's `cls`, RoBERTa's `lm_head`), None where not found."""
    return getattr(model, "cls", None) or getattr(model, "lm_head", None)


class MaskedOnly(torch_module()):
    """The head's loss at the masked tokens alone, the frozen encoder run without gradients: the same
    loss as the masked LM's own forward, which projects every token onto the vocabulary (about 6 times
    the work at 15% masking, on 30,522 words). transformers has no such switch for its MLM heads."""

    def __init__(self, mlm) -> None:
        super().__init__()
        self.mlm = mlm

    def forward(self, input_ids, attention_mask=None, labels=None, **_):
        import torch

        with torch.no_grad():
            hidden = self.mlm.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        chosen = labels != -100
        logits = head_of(self.mlm)(hidden[chosen])
        return {"loss": torch.nn.functional.cross_entropy(logits.float(), labels[chosen])}


def carry_pooler(base: str, out: Path) -> bool:
    """Write `base`'s pooler weights into the checkpoint in `out`, where `out` lacks them (an MLM
    checkpoint saves none): a classifier loaded from `out` then reads [CLS] through the base's pooler, as
    the base's own classifier does. False where the base has no pooler."""
    from safetensors.torch import load_file, save_file
    from transformers import AutoModel

    pooler = getattr(AutoModel.from_pretrained(base), "pooler", None)
    if pooler is None:
        return False
    path = Path(out) / "model.safetensors"
    state = load_file(path)
    prefix = next(k.split(".")[0] for k in state if ".embeddings." in k)  # bert.embeddings...: "bert"
    for name, value in pooler.state_dict().items():
        state.setdefault(f"{prefix}.pooler.{name}", value.detach().clone().contiguous())
    save_file(state, path, metadata={"format": "pt"})
    return True
