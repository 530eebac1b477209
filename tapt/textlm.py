"""Raw-text TAPT for the classifier flow: masked-LM (encoder) or causal-LM (decoder), all weights."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from tapt import record
from tapt.corpus import TaptInput, raw_texts

MLM_PROBABILITY = 0.15
MAX_LENGTH = 256


@dataclass
class TextArgs(TaptInput):
    """Defaults: 256 tokens, one text per sequence, lr 5e-5, batch 16."""

    epochs: float | None = None  # default: 2 for an encoder, 1 for a decoder
    batch_size: int = 16
    lr: float = 5e-5


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
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, Trainer, TrainingArguments, set_seed

    spec, docs = args.docs()
    record.check_base(args.base)
    decoder = is_decoder(args.base)
    epochs = args.epochs or (1.0 if decoder else 2.0)
    with record.staged(Path(args.out), args.overwrite) as tmp:
        set_seed(args.seed)
        tokenizer = record.tokenizer(args.base)
        ids = tokenizer(raw_texts(docs), truncation=True, max_length=MAX_LENGTH)["input_ids"]
        auto = AutoModelForCausalLM if decoder else AutoModelForMaskedLM
        model = auto.from_pretrained(args.base, dtype=torch.float32)
        steps = record.StepLog()
        training = TrainingArguments(
            output_dir=str(tmp / "trainer"), num_train_epochs=epochs, learning_rate=args.lr,
            per_device_train_batch_size=args.batch_size, bf16=record.use_bf16(), logging_steps=1,
            logging_nan_inf_filter=False, save_strategy="no", report_to="none", seed=args.seed,
            data_seed=args.seed, use_cpu=not torch.cuda.is_available(),
        )
        Trainer(model=model, args=training, train_dataset=Dataset.from_dict({"input_ids": ids}),
                data_collator=collator(tokenizer, decoder), callbacks=[steps]).train()
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        rec = {
            "kind": "text", "objective": "clm" if decoder else "mlm", "task": spec.slug, "split": args.split,
            "subsample": args.subsample, "m": args.m, "n": args.n, "seed": args.seed, "base": args.base,
            "packing": False, "epochs": epochs, "lr": args.lr, "batch_size": args.batch_size,
            "max_length": MAX_LENGTH, "sequences": len(ids), "tokens": int(sum(map(len, ids))),
            "rows": docs["row"].tolist(), **steps.summary(),
        }
        record.write_record(tmp, rec)
    return rec
