"""The study's method: prompt TAPT, a (Q)LoRA adapter trained with TRL on the split's zero-shot prompts
(padding or packing; with their answers for the leak)."""

from __future__ import annotations

from tapt import adapter
from tapt.methods import Adapted, Inputs, Method


def adapt(x: Inputs) -> Adapted:
    run = adapter.prepare(x.spec, x.docs, x.settings, x.labeled, x.seed, x.model, x.tokenizer, x.workdir)
    return Adapted(adapter.train(run), adapter.record_of(run))


METHOD = Method(
    name="prompt-tapt",
    flows=("zero_shot",),
    settings=adapter.AdapterSettings,
    adapt=adapt,
    about="the study's prompt TAPT: a (Q)LoRA adapter trained with TRL's SFTTrainer on the split's prompts",
    default_for="zero_shot",
    order=0,
)
