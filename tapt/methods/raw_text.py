"""The classifier flow's method: raw-text TAPT, masked- or causal-LM pretraining of the backbone on the
split's texts (each followed by its class name for the leak)."""

from __future__ import annotations

from tapt.corpus import raw_texts
from tapt.methods import Adapted, Inputs, Method
from tapt.raw_text import TextSettings, pretrain


def adapt(x: Inputs) -> Adapted:
    record = pretrain(x.model, raw_texts(x.docs, x.labeled), x.settings, x.seed, x.workdir)
    return Adapted(str(x.workdir), {**record, "learned_from": len(x.docs)}, restore=lambda: x.model)


METHOD = Method(
    name="raw-text",
    flows=("classifier",),
    settings=TextSettings,
    adapt=adapt,
    about="the study's raw-text TAPT: MLM (encoders) or CLM (decoders) on the split's texts, then a head",
    default_for="classifier",
    order=1,
)
