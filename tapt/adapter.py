"""Prompt TAPT: a (Q)LoRA adapter trained with TRL's SFTTrainer on a split's unlabeled prompts."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from harness.spec import TaskError, TaskSpec
from tapt import record
from tapt.corpus import TaptInput, prompt_sequences


@dataclass
class AdapterArgs(TaptInput):
    """Study defaults: LoRA r 16, alpha 32, dropout 0.05 on all linear layers, 1 epoch, lr 2e-4."""

    packing: bool = False
    epochs: float = 1.0
    quantize: str = "4bit"
    fallback_lora: bool = False  # allow plain LoRA when 4-bit loading is impossible
    batch_size: int = 8
    max_length: int | None = None  # default: 256 for padding, 2048 for packing
    lr: float = 2e-4


def lora_config():
    from peft import LoraConfig

    return LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, bias="none",
                      target_modules="all-linear", task_type="CAUSAL_LM")


def load_base(base: str, quantize: str, fallback_lora: bool):
    """The base model, in 4-bit NF4 with double quantisation when asked; returns (model, quantized)."""
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    dtype = torch.bfloat16 if record.use_bf16() else torch.float32
    if quantize == "4bit":
        bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                 bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=dtype)
        try:
            return AutoModelForCausalLM.from_pretrained(base, quantization_config=bnb, dtype=dtype), True
        except (ImportError, RuntimeError, ValueError) as err:
            if not fallback_lora:
                raise TaskError(
                    f"cannot load {base} in 4-bit ({type(err).__name__}: {err}); pass --quantize none "
                    "or --fallback-lora to train plain LoRA instead"
                ) from err
            warnings.warn(f"4-bit loading failed ({err}); training plain LoRA as --fallback-lora allows")
    elif quantize != "none":
        raise TaskError(f"--quantize must be 4bit or none, got {quantize!r}")
    return AutoModelForCausalLM.from_pretrained(base, dtype=dtype), False


def sft_config(workdir: Path, epochs: float, lr: float, batch_size: int, max_length: int, seed: int):
    """TRL settings shared by every adapter we train: explicit precision, no checkpointing, a log per step."""
    from trl import SFTConfig

    return SFTConfig(
        output_dir=str(workdir / "trainer"), num_train_epochs=epochs, learning_rate=lr,
        per_device_train_batch_size=batch_size, max_length=max_length, packing=False,
        bf16=record.use_bf16(), fp16=False, gradient_checkpointing=False,
        logging_steps=1, logging_nan_inf_filter=False, save_strategy="no", report_to="none",
        seed=seed, data_seed=seed, use_cpu=not torch.cuda.is_available(),
    )


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
    steps: record.StepLog
    docs: object
    quantized: bool
    max_length: int


def prepare(args: AdapterArgs, workdir: Path, model=None) -> Prepared:
    """Build the SFTTrainer for one split's prompts; `model` reuses an already loaded base."""
    from transformers import set_seed
    from trl import SFTTrainer

    spec, docs = args.docs()
    record.check_base(args.base)
    max_length = args.max_length or (2048 if args.packing else 256)
    set_seed(args.seed)
    tokenizer = record.tokenizer(args.base)
    dataset = tokenized(tokenizer, prompt_sequences(spec, docs, args.packing), max_length)
    quantized = getattr(model, "is_loaded_in_4bit", False)
    if model is None:
        model, quantized = load_base(args.base, args.quantize, args.fallback_lora)
    steps = record.StepLog()
    config = sft_config(workdir, args.epochs, args.lr, args.batch_size, max_length, args.seed)
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                         peft_config=lora_config(), callbacks=[steps])
    return Prepared(trainer, spec, steps, docs, quantized, max_length)


def record_of(args: AdapterArgs, run: Prepared) -> dict:
    """The tapt.json content of a finished training run."""
    ids = run.trainer.train_dataset["input_ids"]
    return {
        "kind": "adapter", "task": run.spec.slug, "split": args.split, "subsample": args.subsample,
        "m": args.m, "n": args.n, "seed": args.seed, "base": args.base, "packing": args.packing,
        "epochs": args.epochs, "quantized_4bit": run.quantized, "lr": args.lr, "batch_size": args.batch_size,
        "max_length": run.max_length, "sequences": len(ids), "tokens": int(sum(map(len, ids))),
        "rows": run.docs["row"].tolist(), **run.steps.summary(),
    }


def train_adapter(args: AdapterArgs) -> dict:
    """Train and save the adapter to args.out with its tapt.json; returns the record."""
    with record.staged(Path(args.out), args.overwrite) as tmp:
        run = prepare(args, tmp)
        run.trainer.train()
        run.trainer.model.save_pretrained(tmp)
        rec = record_of(args, run)
        record.write_record(tmp, rec)
    return rec
