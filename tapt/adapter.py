"""Prompt TAPT: a (Q)LoRA adapter trained with TRL's SFTTrainer on a split's unlabeled prompts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pandas as pd

from harness.core.engine import models
from harness.core.engine.models import FormSettings, PrecisionSettings
from harness.core.plumbing.errors import SettingsError
from harness.core.plumbing.settings import WHEN_SET, option
from harness.tasks.prompts import PACK_SIZE
from harness.tasks.protocol import Spec, gold_continuations
from tapt.corpus import TaptArgs, keeping_answers, prompt_sequences

if TYPE_CHECKING:
    from harness.core.engine import training

LORA = {
    "r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.05,
    "target_modules": "all-linear",
}  # the study's adapter
PACKED_MAX_LENGTH = 2048  # tokens per packed sequence: the instruction and PACK_SIZE texts


@dataclass(kw_only=True)
class LoraTrainingSettings(PrecisionSettings):
    """How a LoRA adapter is trained on prompts (the study: 1 epoch, lr 2e-4, batch 8)."""

    MINIMUM = {"batch_size": 1, "max_length": 8}
    ABOVE = {"lr": 0.0, "epochs": 0.0}  # an lr or epochs of 0 train nothing: every effect would read n/a

    packing: bool = option(
        False, f"instruction once, then {PACK_SIZE} texts per sequence (default: one prompt per sequence)"
    )
    epochs: float = option(1.0, "training epochs")
    batch_size: int = option(8, "training batch size")
    max_length: int | None = option(
        None, f"tokens per sequence (default: {models.MAX_LENGTH} padding, {PACKED_MAX_LENGTH} packing)"
    )
    lr: float = option(2e-4, "learning rate")

    def sequence_length(self) -> int:
        return self.max_length or (PACKED_MAX_LENGTH if self.packing else models.MAX_LENGTH)

    def trainer_options(self) -> dict:
        """TrainingArguments this method's settings set beyond the shared ones (none here)."""
        return {}


@dataclass(kw_only=True)
class AdapterSettings(LoraTrainingSettings, FormSettings):
    """How a prompt-TAPT adapter is trained, on which form of the base (the study: QLoRA)."""

    optim: Literal["adamw_torch", "paged_adamw_8bit"] = option(
        "adamw_torch", "the optimiser, by its TrainingArguments name (the study: paged_adamw_8bit with 4bit)"
    )
    gradient_checkpointing: bool = option(
        False, "recompute activations in the backward pass: less memory, more time (the study: on with 4bit)"
    )

    RECORD = {"optim": WHEN_SET, "gradient_checkpointing": WHEN_SET}  # added after the first results

    def trainer_options(self) -> dict:
        return {"optim": self.optim, "gradient_checkpointing": self.gradient_checkpointing}


class AdapterArgs(TaptArgs):
    """One prompt-TAPT run outside the grid: a TAPT run's sections and how its adapter trains."""

    SECTIONS = TaptArgs.SECTIONS | {"adapter": AdapterSettings}
    TITLES = TaptArgs.TITLES | {"adapter": "the adapter's training"}


def lora_config():
    from peft import LoraConfig

    return LoraConfig(**LORA, bias="none", task_type="CAUSAL_LM")


def sft_config(
    workdir: Path,
    epochs: float,
    lr: float,
    batch_size: int,
    max_length: int,
    seed: int,
    bf16: bool = False,
    **options,
):
    """TRL's SFTConfig with the shared training settings (and `options` over them); the sequences come
    pre-tokenized."""
    from trl import SFTConfig

    from harness.core.engine import training  # torch: imported where a model trains, not where settings parse

    return training.arguments(
        workdir,
        epochs,
        lr,
        batch_size,
        seed,
        SFTConfig,
        bf16,
        max_length=max_length,
        packing=False,
        **options,
    )


def sft_trainer_class():
    """TRL's SFTTrainer with the model's own loss: TRL computes every step's loss through a chunked LM
    head that also yields per-token entropy and top-1 accuracy, metrics a TAPT run never reads (their
    cost is in the README); TRL's docs name overriding `compute_loss` as the way out."""
    from transformers import Trainer
    from trl import SFTTrainer

    class TaptSFTTrainer(SFTTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            inputs["use_cache"] = False
            return Trainer.compute_loss(self, model, inputs, return_outputs, num_items_in_batch)

    return TaptSFTTrainer


def tokenized(tokenizer, sequences: list[str], max_length: int, answers: list[str] | None = None):
    """Pre-tokenized so TRL trains exactly these tokens (it would otherwise append EOS after
    '### Answer:', teaching the model to end where the class name should start). With `answers` (the leak,
    one prompt a sequence), each sequence is followed by its answer, and a sequence too long is cut in its
    prompt, never in its answer."""
    from datasets import Dataset

    special = adds_bos(tokenizer, sequences)
    if answers is not None:
        return Dataset.from_dict(
            {"input_ids": keeping_answers(tokenizer, list(zip(sequences, answers)), max_length, special)}
        )
    ids = tokenizer(sequences, truncation=True, max_length=max_length, add_special_tokens=special)
    return Dataset.from_dict({"input_ids": ids["input_ids"]})


def adds_bos(tokenizer, texts: list[str]) -> bool:
    """Whether the tokenizer should add its special tokens: not where every text (a chat template's)
    begins with the BOS already, which would then be there twice."""
    bos = tokenizer.bos_token
    return not (bos and texts and all(t.startswith(bos) for t in texts))


def completion_only(tokenizer, prompts: list[str], completions: list[str], max_length: int):
    """Pre-tokenized prompt + completion, the loss on the completion's tokens alone (the prompt's labels
    -100), as the study trains its labels (a completion-only collator after ' ### Answer:'). A pair too
    long is cut in its prompt, never in its completion."""
    from datasets import Dataset

    special = adds_bos(tokenizer, prompts)
    rows = {"input_ids": [], "labels": []}
    pairs = list(zip(prompts, completions))
    for ids, (prompt, completion) in zip(keeping_answers(tokenizer, pairs, max_length, special), pairs):
        own = len(tokenizer(prompt, add_special_tokens=special)["input_ids"])
        if own >= len(ids):  # the prompt was cut to keep the completion: the completion's tokens end it
            own = len(ids) - len(tokenizer(completion, add_special_tokens=False)["input_ids"])
        rows["input_ids"].append(ids)
        rows["labels"].append([-100] * own + ids[own:])
    return Dataset.from_dict(rows)


@dataclass
class Prepared:
    """A ready SFTTrainer and what went into it."""

    trainer: object
    steps: training.StepLog
    docs: pd.DataFrame
    quantized: bool
    max_length: int
    input_hooks: set  # the forward hooks on the base's input embeddings before the trainer was built


def prepare(
    spec: Spec,
    docs: pd.DataFrame,
    settings: LoraTrainingSettings,
    answers: bool,
    seed: int,
    model,
    tokenizer,
    workdir: Path,
    carried: bool = False,
    answers_only: bool = False,
    copies: int = 1,
) -> Prepared:
    """The SFTTrainer of one split's prompts (`docs`), on an already loaded base and its tokenizer; with
    `carried`, on the adapter `model` already holds (a stream's later chunk) instead of a new one; with
    `answers_only` (and answers, one prompt a sequence), the loss on each answer's tokens alone; `copies`:
    each answer written that many times after its prompt (the planted leak's strength, padding only)."""
    from transformers import set_seed

    from harness.core.engine import training

    max_length = settings.sequence_length()
    set_seed(seed)
    if answers and copies > 1 and settings.packing:
        raise SettingsError.of(
            "leak_strength",
            f"is {copies}, and packing puts several prompts in a sequence, each answered once: "
            "use leak_strength 1 with packing, or padding",
        )
    if answers and answers_only and not settings.packing:
        dataset = completion_only(tokenizer, list(docs["prompt"]), gold_continuations(spec, docs), max_length)
    else:
        ends = gold_continuations(spec, docs) if answers and not settings.packing else None
        ends = [end * copies for end in ends] if ends else ends
        sequences = list(docs["prompt"]) if ends else prompt_sequences(spec, docs, settings.packing, answers)
        dataset = tokenized(tokenizer, sequences, max_length, ends)
    steps = training.StepLog()
    hooks = set(model.get_input_embeddings()._forward_hooks)
    config = sft_config(
        workdir,
        settings.epochs,
        settings.lr,
        settings.batch_size,
        max_length,
        seed,
        settings.bf16,
        **settings.trainer_options(),
    )
    trainer = sft_trainer_class()(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=None if carried else lora_config(),
        callbacks=[steps],
    )
    quantized = getattr(model, "is_loaded_in_4bit", False)
    return Prepared(trainer, steps, docs, quantized, max_length, hooks)


def train(run: Prepared):
    """Train; the adapted model with the Trainer's autocast wrapper (bf16) taken off its forward, so that
    it is scored in its own precision, as the base is, and gradient checkpointing (with the hook it puts on
    the base's input embeddings) turned off again."""
    run.trainer.train()
    model = run.trainer.accelerator.unwrap_model(run.trainer.model, keep_fp32_wrapper=False)
    if run.trainer.args.gradient_checkpointing:
        # the base as it was: no checkpointing, and none of the hooks that make its input embeddings require
        # grad (TRL, PEFT and transformers each add one; transformers keeps a handle to the last alone)
        base = model.get_base_model()
        base.gradient_checkpointing_disable()
        added = base.get_input_embeddings()._forward_hooks
        for key in set(added) - run.input_hooks:
            del added[key]
    return model


def record_of(run: Prepared) -> dict:
    """What a finished training run did: its data (rows, sequences, tokens) and its step log."""
    ids = run.trainer.train_dataset["input_ids"]
    return {
        "quantized_4bit": run.quantized,
        "max_length": run.max_length,
        "sequences": len(ids),
        "tokens": int(sum(map(len, ids))),
        "rows": run.docs["row"].tolist(),
        "learned_from": len(run.docs),
        **run.steps.summary(),
    }
