"""The classifier flow's method: raw-text TAPT, masked- or causal-LM pretraining of the backbone on the
split's texts (each followed by its class name for the leak)."""

from __future__ import annotations

from harness.core.engine import models
from tapt.corpus import raw_texts
from tapt.methods import Adapted, Inputs, Method, recipe_table
from tapt.methods.raw_text.pretrain import MLM_PROBABILITY, TextSettings, pretrain


def adapt(x: Inputs) -> Adapted:
    record = pretrain(
        x.model_dir, raw_texts(x.docs, x.labeled, x.leak_strength), x.settings, x.seed, x.workdir
    )
    return Adapted(record={**record, "learned_from": len(x.docs)}, model_dir=str(x.workdir))


DEFAULTS = TextSettings()
# the study's code: kddubey/pretrain-on-test at 80fd183 (run.py, src/pretrain_on_test/pretrain.py and
# _config.py, and the launch scripts cloud_scripts/gcp/experiments/m100/n100/{bert,gpt2}/*_1.sh)
RECIPE = recipe_table(
    [
        ("objective", "MLM for BERT, CLM for GPT-2 (pretrain.py:1-3, 62-66)", "the same", ""),
        ("masking", "15% (run.py:48)", f"{MLM_PROBABILITY:.0%}", ""),
        ("weights", "all, no LoRA (run.py:50, 60)", "all", ""),
        ("max length", "256 (run.py:53, 63)", f"{models.MAX_LENGTH}", ""),
        (
            "epochs",
            "2 for BERT, 1 for GPT-2 (bert_1.sh:11, gpt2_1.sh:13)",
            "2 for an encoder, 1 for a decoder",
            "",
        ),
        (
            "batch",
            "16 (bert_5.sh:17, bert_6.sh; _config.py:33's default); 8 for yahoo_answers_topics "
            "(bert_1.sh:9), enron_spam and yelp_review_full (bert_2.sh:10) and the long-text tasks "
            "(bert_3.sh:10, bert_4.sh)",
            f"{DEFAULTS.pretrain_batch_size}; 8 for those tasks (the default task_overrides)",
            "",
        ),
        (
            "lr",
            "1e-4, AdamW (pretrain.py:74, 76)",
            f"{DEFAULTS.pretrain_lr:g}, AdamW; the bert, gpt2 and table1 configs set 1e-4",
            "the method's default is transformers' 5e-5; the shipped configs of the study set the study's",
        ),
    ]
)

METHOD = Method(
    name="raw-text",
    flows=("classifier",),
    settings=TextSettings,
    adapt=adapt,
    about="the study's raw-text TAPT: MLM (encoders) or CLM (decoders) on the split's texts, then a head",
    recipe=RECIPE,
)
