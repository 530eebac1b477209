"""Raw-text TAPT for the classifier flow: masked-LM (encoder) or causal-LM (decoder), all weights."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch

from harness.settings import Settings, option
from tapt import base_model, output, training
from tapt.corpus import TaptInput, raw_texts

MLM_PROBABILITY = 0.15
MAX_LENGTH = 256


@dataclass(kw_only=True)
class TextSettings(Settings):
    """How a backbone is pretrained on raw texts (256 tokens, one text per sequence)."""

    MINIMUM = {"epochs": 0.0, "batch_size": 1, "lr": 0.0}

    epochs: float | None = option(None, "default: 2 for an encoder (MLM), 1 for a decoder (CLM)")
    batch_size: int = option(16, "training batch size")
    lr: float = option(5e-5, "learning rate (transformers' AdamW default)")


@dataclass(kw_only=True)
class TextArgs(TaptInput, TextSettings):
    """One `tapt-bench pretrain-text` run."""


def is_decoder(base: str) -> bool:
    """A causal LM by its architecture name (…ForCausalLM, …LMHeadModel); otherwise an encoder."""
    from transformers import AutoConfig

    archs = AutoConfig.from_pretrained(base).architectures or []
    return any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs)


def collator(tokenizer, decoder: bool):
    """Pads each batch; masks 15% of tokens for MLM, or shifts for CLM (pads ignored in the loss)."""
    from transformers import DataCollatorForLanguageModeling

    return DataCollatorForLanguageModeling(tokenizer, mlm=not decoder, mlm_probability=MLM_PROBABILITY)


def pretrain_text(args: TextArgs) -> dict:
    """Pretrain args.base on a split's raw texts and save a model dir (with tokenizer and tapt.json)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, Trainer, set_seed

    spec, docs = args.docs()
    base_model.check_base(args.base)
    decoder = is_decoder(args.base)
    epochs = args.epochs or (1.0 if decoder else 2.0)
    with output.staged(Path(args.out), args.overwrite) as tmp:
        set_seed(args.seed)
        tokenizer = base_model.tokenizer(args.base)
        ids = tokenizer(raw_texts(docs), truncation=True, max_length=MAX_LENGTH)["input_ids"]
        auto = AutoModelForCausalLM if decoder else AutoModelForMaskedLM
        model = auto.from_pretrained(args.base, dtype=torch.float32)
        steps = training.StepLog()
        Trainer(model=model, args=training.arguments(tmp, epochs, args.lr, args.batch_size, args.seed),
                train_dataset=Dataset.from_dict({"input_ids": ids}),
                data_collator=collator(tokenizer, decoder), callbacks=[steps]).train()
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        settings = {k: v for k, v in dataclasses.asdict(args).items() if k not in ("out", "overwrite")}
        rec = {
            "kind": "text", **settings, "objective": "clm" if decoder else "mlm", "task": spec.slug,
            "epochs": epochs, "max_length": MAX_LENGTH, "sequences": len(ids), "tokens": int(sum(map(len, ids))),
            "rows": docs["row"].tolist(), **steps.summary(),
        }
        output.write_record(tmp, rec)
    return rec
