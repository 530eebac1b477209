"""The classifier flow's scoring: a linear head on the LM, fine-tuned with all weights on `train`,
then class probabilities for every `test` document.

Encoders classify from the [CLS] position and decoders from the last non-pad token
(transformers' AutoModelForSequenceClassification does both; a decoder pads with its EOS token).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from harness.core import models
from harness.core.settings import Settings, option

LONG_TEXT_TASKS = ("blog_authorship_corpus", "craigslist_bargains", "frenk_hate_en", "movie_rationales")
# The study's per-task settings: its long-text tasks train 1 epoch at batch 8 (pretraining: batch 8)
STUDY_TASK_OVERRIDES = {
    slug: {"clf_epochs": 1.0, "clf_batch_size": 8, "pretrain_batch_size": 8} for slug in LONG_TEXT_TASKS
}


@dataclass(kw_only=True)
class ClassifierSettings(Settings):
    """How the head and the LM are fine-tuned on `train` (the study: 3 epochs, batch 16, AdamW at
    transformers' default learning rate 5e-5)."""

    MINIMUM = {"clf_epochs": 0.0, "clf_batch_size": 1}
    ABOVE = {"clf_lr": 0.0}  # an lr of 0 trains nothing

    clf_epochs: float = option(3.0, "classifier fine-tuning epochs on train")
    clf_batch_size: int = option(16, "classifier fine-tuning batch size")
    clf_lr: float = option(5e-5, "classifier fine-tuning learning rate")


def load_classifier(backbone: str, num_classes: int, seed: int):
    """The backbone with a new linear head, its random init seeded (the study's second source of variance)."""
    import torch
    from transformers import AutoModelForSequenceClassification, set_seed

    tokenizer = models.tokenizer(backbone)
    tokenizer.padding_side = (
        "right"  # an encoder reads [CLS] at position 0; a decoder finds its last token either way
    )
    set_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(
        backbone, num_labels=num_classes, dtype=torch.float32
    )
    model.config.pad_token_id = tokenizer.pad_token_id  # a decoder finds its last non-pad token by it
    return model, tokenizer


def encoded(tokenizer, docs: pd.DataFrame):
    from datasets import Dataset

    enc = tokenizer(list(docs["text"]), truncation=True, max_length=models.MAX_LENGTH)
    return Dataset.from_dict({**enc, "labels": [int(y) for y in docs["label"]]})


def trainer(
    backbone: str,
    train: pd.DataFrame,
    num_classes: int,
    settings: ClassifierSettings,
    eval_batch_size: int,
    seed: int,
    workdir: Path,
):
    """The Trainer that fine-tunes head + LM on `train`, with its step log."""
    from transformers import DataCollatorWithPadding, Trainer

    from harness.core import training

    model, tokenizer = load_classifier(backbone, num_classes, seed)
    steps = training.StepLog()
    args = training.arguments(
        workdir,
        settings.clf_epochs,
        settings.clf_lr,
        settings.clf_batch_size,
        seed,
        per_device_eval_batch_size=eval_batch_size,
    )
    return Trainer(
        model=model,
        args=args,
        train_dataset=encoded(tokenizer, train),
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer),
        callbacks=[steps],
    ), steps


def classify(
    backbone: str,
    train: pd.DataFrame,
    test: pd.DataFrame,
    num_classes: int,
    settings: ClassifierSettings,
    eval_batch_size: int,
    seed: int,
) -> tuple[pd.DataFrame, dict]:
    """Fine-tune head + LM on `train`; per `test` doc its row, label, class probabilities and
    correctness, and the training log (with the seconds spent training and predicting)."""
    import torch

    with tempfile.TemporaryDirectory() as work:
        fit, steps = trainer(backbone, train, num_classes, settings, eval_batch_size, seed, Path(work))
        clock = time.perf_counter()
        fit.train()
        train_seconds, clock = time.perf_counter() - clock, time.perf_counter()
        logits = fit.predict(encoded(fit.processing_class, test)).predictions
        predict_seconds = time.perf_counter() - clock
    probs = torch.softmax(torch.tensor(np.asarray(logits), dtype=torch.float64), dim=-1).numpy()
    labels = test["label"].to_numpy()
    scored = pd.DataFrame(
        {
            "row": test["row"].to_numpy(),
            "label": labels,
            "probs": list(map(list, probs)),
            "correct": probs.argmax(-1) == labels,
        }
    )
    return scored, {**steps.summary(), "train_seconds": train_seconds, "predict_seconds": predict_seconds}
