"""Raw-text TAPT for the classifier flow: masked-LM (encoder) or causal-LM (decoder), all weights,
one text per sequence, padded (never packed)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from harness.core.engine import models
from harness.core.plumbing.settings import Settings, option
from tapt import output
from tapt.corpus import TaptArgs, answer_masks, keeping_answers, raw_texts

MLM_PROBABILITY = 0.15


@dataclass(kw_only=True)
class TextSettings(Settings):
    """How a backbone is pretrained on raw texts (the study: batch 16; 2 epochs for BERT, 1 for GPT-2)."""

    MINIMUM = {"pretrain_batch_size": 1}
    ABOVE = {"pretrain_epochs": 0.0, "pretrain_lr": 0.0}  # epochs or an lr of 0 train nothing

    pretrain_epochs: float | None = option(None, "default: 2 for an encoder (MLM), 1 for a decoder (CLM)")
    pretrain_batch_size: int = option(16, "pretraining batch size")
    pretrain_lr: float = option(5e-5, "pretraining learning rate (transformers' AdamW default)")


class TextArgs(TaptArgs):
    """One `tapt-bench train --method raw-text` run: a TAPT run's sections and how it pretrains."""

    SECTIONS = TaptArgs.SECTIONS | {"text": TextSettings}
    TITLES = TaptArgs.TITLES | {"text": "raw-text pretraining"}


def collator(tokenizer, decoder: bool):
    """Pads each batch; masks 15% of tokens for MLM, or shifts for CLM (pads ignored in the loss)."""
    from transformers import DataCollatorForLanguageModeling

    pad_and_mask = DataCollatorForLanguageModeling(
        tokenizer, mlm=not decoder, mlm_probability=MLM_PROBABILITY
    )
    return pad_and_mask if decoder else AtLeastOneMask(pad_and_mask, tokenizer)


class AnswerMasked:
    """The planted leak's MLM batches: every token of each document's answer (its class name, the
    `answer_mask` column) masked on every read, the text's tokens masked at 15% as extra's and test's
    are. Without it a one-token class name is masked in about one read of a document's eight, and the
    leak differs from test by a label it is seldom asked for (the original ids are the labels)."""

    def __init__(self, collate, tokenizer) -> None:
        self.collate, self.tokenizer = collate, tokenizer

    def __call__(self, examples):
        import torch

        marks = [e["answer_mask"] for e in examples]
        batch = self.collate([{"input_ids": e["input_ids"]} for e in examples])
        ids, labels = batch["input_ids"], batch["labels"]
        original = torch.where(labels != -100, labels, ids)
        forced = torch.zeros_like(ids, dtype=torch.bool)
        for i, mark in enumerate(marks):
            forced[i, : len(mark)] = torch.tensor(mark, dtype=torch.bool)
        labels[forced] = original[forced]
        ids[forced] = self.tokenizer.mask_token_id
        return batch


class AtLeastOneMask:
    """A batch of a few short texts can draw no masked token at all, and its MLM loss is then NaN
    (a mean over no token); transformers' collator has no guard, so mask one token of such a batch."""

    def __init__(self, collate, tokenizer) -> None:
        self.collate, self.tokenizer = collate, tokenizer

    def __call__(self, examples):
        batch = self.collate(examples)
        if (batch["labels"] != -100).any():
            return batch
        import torch

        ids = batch["input_ids"]
        special = torch.tensor(
            [
                self.tokenizer.get_special_tokens_mask(row.tolist(), already_has_special_tokens=True)
                for row in ids
            ],
            dtype=torch.bool,
        )
        candidates = (~special & (batch["attention_mask"] == 1)).nonzero()
        if len(candidates):
            i, j = candidates[torch.randint(len(candidates), (1,)).item()]
            batch["labels"][i, j] = ids[i, j]
            ids[i, j] = self.tokenizer.mask_token_id
        return batch


def lm_head_is_new(base: str) -> bool:
    """True when the checkpoint has no MLM head (all-MiniLM-L6-v2, say): MLM then starts from a
    random head."""
    from transformers import AutoConfig

    archs = AutoConfig.from_pretrained(base).architectures or []
    return not any(a.endswith(("ForMaskedLM", "ForPreTraining", "ForCausalLM", "LMHeadModel")) for a in archs)


def training_inputs(tokenizer, ids: list[list[int]], texts: list[tuple[str, str]], decoder: bool):
    """(the dataset's columns, its collator, what was planted): an encoder's leak has its answers masked on
    every read (AnswerMasked), with how many answer tokens it holds and how many answers were not found."""
    columns, collate, planted = {"input_ids": ids}, collator(tokenizer, decoder), {}
    if not decoder and any(answer for _, answer in texts):
        columns["answer_mask"] = answer_masks(tokenizer, ids, texts)
        collate = AnswerMasked(collate, tokenizer)
        planted = {
            "answer_tokens": int(sum(map(sum, columns["answer_mask"]))),
            "answers_not_found": sum(1 for m in columns["answer_mask"] if not any(m)),
        }
    return columns, collate, planted


def pretrain(base: str, texts: list[tuple[str, str]], settings: TextSettings, seed: int, out: Path) -> dict:
    """Pretrain `base` on `texts` ((text, what follows it) pairs: raw_texts) and save model and tokenizer to
    `out`; returns the training record."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, Trainer, set_seed

    from harness.core.engine import training

    decoder = models.is_decoder(base)
    epochs = settings.pretrain_epochs or (1.0 if decoder else 2.0)
    new_head = not decoder and lm_head_is_new(base)
    if new_head:
        warnings.warn(
            f"{base} has no MLM head: masked-LM pretraining starts from a randomly initialised one "
            "(it is discarded afterwards: the classifier keeps only the encoder)",
            stacklevel=2,
        )
    set_seed(seed)
    tokenizer = models.tokenizer(base)
    ids = keeping_answers(tokenizer, texts, models.MAX_LENGTH)
    columns, collate, planted = training_inputs(tokenizer, ids, texts, decoder)
    model = (AutoModelForCausalLM if decoder else AutoModelForMaskedLM).from_pretrained(
        base, dtype=torch.float32
    )
    steps = training.StepLog()
    args = training.arguments(
        out, epochs, settings.pretrain_lr, settings.pretrain_batch_size, seed, remove_unused_columns=False
    )
    Trainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_dict(columns),
        data_collator=collate,
        callbacks=[steps],
    ).train()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)

    from tapt.methods.raw_text import mlm_head  # torch: loaded where a model trains

    fitted_start = not decoder and (Path(base) / mlm_head.RECORD_NAME).is_file()
    if fitted_start:  # every condition keeps the pooler its start carries, as the base's classifier does
        mlm_head.carry_pooler(base, out)
    return {
        "objective": "clm" if decoder else "mlm",
        "epochs": epochs,
        "mlm_head_was_new": new_head,
        **({"started_from_fitted_head": True} if fitted_start else {}),
        "max_length": models.MAX_LENGTH,
        "sequences": len(ids),
        "tokens": int(sum(map(len, ids))),
        "tokens_seen": round(epochs * sum(map(len, ids))),  # every sequence read `epochs` times
        **planted,
        **steps.summary(),
    }


def pretrain_text(args: TextArgs) -> dict:
    """Pretrain args.base on a split's raw texts and save a model dir (with tokenizer and tapt.json)."""
    spec, docs = args.sample.docs()
    base, options = args.model.base, args.options
    models.check_base(base, "--base")
    with output.staged(Path(options.out), options.overwrite) as tmp:
        trained = pretrain(base, raw_texts(docs, options.leak), args.text, args.sample.seed, tmp)
        rec = {"kind": "text", **args.recorded(), "task": spec.slug, **trained, "rows": docs["row"].tolist()}
        output.write_record(tmp, rec)
    return rec
