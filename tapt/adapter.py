"""Prompt TAPT: a (Q)LoRA adapter trained with TRL's SFTTrainer on a split's unlabeled prompts."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from harness.errors import UserError
from harness.settings import Settings, option
from harness.spec import TaskSpec
from tapt import base_model, output, training
from tapt.corpus import TaptInput, prompt_sequences

LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05, "target_modules": "all-linear"}  # the study's adapter


@dataclass(kw_only=True)
class AdapterSettings(Settings):
    """How a prompt-TAPT adapter is trained (the study: QLoRA, 1 epoch, lr 2e-4, batch 8)."""

    MINIMUM = {"epochs": 0.0, "batch_size": 1, "max_length": 8, "lr": 0.0}

    packing: bool = option(False, "instruction once, then 8 texts per sequence (default: one prompt per sequence)")
    epochs: float = option(1.0, "training epochs")
    quantize: Literal["4bit", "none"] = option("4bit", "4bit: QLoRA (NF4, double quantisation); none: plain LoRA")
    fallback_lora: bool = option(False, "train plain LoRA if 4-bit loading fails")
    batch_size: int = option(8, "training batch size")
    max_length: int | None = option(None, "tokens per sequence (default: 256 padding, 2048 packing)")
    lr: float = option(2e-4, "learning rate")


@dataclass(kw_only=True)
class AdapterArgs(TaptInput, AdapterSettings):
    """One `tapt-bench train` run: the split to train on and how."""


def lora_config():
    from peft import LoraConfig

    return LoraConfig(**LORA, bias="none", task_type="CAUSAL_LM")


def load_base(base: str, quantize: str, fallback_lora: bool):
    """The base model, in 4-bit NF4 with double quantisation when asked; returns (model, quantized)."""
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    dtype = torch.bfloat16 if training.use_bf16() else torch.float32
    if quantize == "4bit":
        bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                 bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=dtype)
        try:
            return AutoModelForCausalLM.from_pretrained(base, quantization_config=bnb, dtype=dtype), True
        except (ImportError, RuntimeError, ValueError) as err:
            if not fallback_lora:
                raise UserError(
                    f"cannot load {base} in 4-bit ({type(err).__name__}: {err}); pass --quantize none "
                    "or --fallback-lora to train plain LoRA instead"
                ) from err
            warnings.warn(f"4-bit loading failed ({err}); training plain LoRA as --fallback-lora allows")
    return AutoModelForCausalLM.from_pretrained(base, dtype=dtype), False


def sft_config(workdir: Path, epochs: float, lr: float, batch_size: int, max_length: int, seed: int):
    """TRL's SFTConfig with the shared training settings; the sequences come pre-tokenized."""
    from trl import SFTConfig

    return training.arguments(workdir, epochs, lr, batch_size, seed, cls=SFTConfig, max_length=max_length,
                              packing=False)


def sft_trainer_class():
    """TRL's SFTTrainer with the model's own loss. TRL 1.16 computes every step's loss through a chunked
    "fused" LM head that also yields per-token entropy and top-1 accuracy, metrics a TAPT run never reads
    (measured 1.3-1.4x a raw step here); TRL's docs name overriding `compute_loss` as the way out."""
    from transformers import Trainer
    from trl import SFTTrainer

    class TaptSFTTrainer(SFTTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            inputs["use_cache"] = False
            return Trainer.compute_loss(self, model, inputs, return_outputs, num_items_in_batch)

    return TaptSFTTrainer


def tokenized(tokenizer, sequences: list[str], max_length: int):
    """Pre-tokenized so TRL trains exactly these tokens (it would otherwise append EOS after
    '### Answer:', teaching the model to end where the class name should start)."""
    from datasets import Dataset

    ids = tokenizer(sequences, truncation=True, max_length=max_length)["input_ids"]
    return Dataset.from_dict({"input_ids": ids})


@dataclass
class Prepared:
    """A ready SFTTrainer and what went into it."""

    trainer: object
    spec: TaskSpec
    steps: training.StepLog
    docs: object
    quantized: bool
    max_length: int


def prepare(args: AdapterArgs, workdir: Path, model=None) -> Prepared:
    """Build the SFTTrainer for one split's prompts; `model` reuses an already loaded base."""
    from transformers import set_seed

    spec, docs = args.docs()
    base_model.check_base(args.base)
    max_length = args.max_length or (2048 if args.packing else 256)
    set_seed(args.seed)
    tokenizer = base_model.tokenizer(args.base)
    dataset = tokenized(tokenizer, prompt_sequences(spec, docs, args.packing, args.answers), max_length)
    quantized = getattr(model, "is_loaded_in_4bit", False)
    if model is None:
        model, quantized = load_base(args.base, args.quantize, args.fallback_lora)
    steps = training.StepLog()
    config = sft_config(workdir, args.epochs, args.lr, args.batch_size, max_length, args.seed)
    trainer = sft_trainer_class()(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                         peft_config=lora_config(), callbacks=[steps])
    return Prepared(trainer, spec, steps, docs, quantized, max_length)


def record_of(args: AdapterArgs, run: Prepared) -> dict:
    """The tapt.json content of a finished training run: its settings, data, and training log."""
    ids = run.trainer.train_dataset["input_ids"]
    settings = {k: v for k, v in dataclasses.asdict(args).items() if k not in ("out", "overwrite")}
    return {
        "kind": "adapter", **settings, "task": run.spec.slug, "quantized_4bit": run.quantized,
        "max_length": run.max_length, "sequences": len(ids), "tokens": int(sum(map(len, ids))),
        "rows": run.docs["row"].tolist(), **run.steps.summary(),
    }


def train_adapter(args: AdapterArgs) -> dict:
    """Train and save the adapter to args.out with its tapt.json; returns the record."""
    with output.staged(Path(args.out), args.overwrite) as tmp:
        run = prepare(args, tmp)
        run.trainer.train()
        run.trainer.model.save_pretrained(tmp)
        rec = record_of(args, run)
        output.write_record(tmp, rec)
    return rec
