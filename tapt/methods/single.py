"""One adaptation outside the grid (`tapt-bench train --method NAME`): a method run on one subsample
split and saved as a PEFT adapter dir (or, for a method that changes the base itself, a model dir;
raw-text TAPT, the classifier flow's, pretrains the whole backbone and saves it as a model dir)."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from harness.core.engine import models, weights
from harness.core.engine.models import FormSettings
from harness.core.plumbing.errors import UserError
from harness.core.plumbing.settings import Settings, pick
from harness.tasks.protocol import unlabeled
from tapt import methods, output
from tapt.corpus import TaptArgs
from tapt.methods import Inputs, Method, nothing_learned, prompt_tapt, raw_text
from tapt.methods.raw_text.pretrain import TextArgs, pretrain_text


class TrainArgs(TaptArgs):
    """One `tapt-bench train` run: a TAPT run's sections and the form of the base (the method's own
    settings are its settings class's: `tapt-bench train --method NAME --help`)."""

    SECTIONS = TaptArgs.SECTIONS | {"form": FormSettings}
    TITLES = TaptArgs.TITLES | {"form": "the base's form"}


def train(args: TrainArgs, method: Method | str | None = None, settings: Settings | None = None) -> dict:
    """`tapt-bench train`: adapt the base on one split with `method` (default: the zero_shot flow's
    default method) and its `settings` (default: those of its fields `args` holds) and save it to
    args.out; returns the record written to its tapt.json."""
    if not isinstance(method, Method):
        method = methods.find(method or prompt_tapt.METHOD.name)  # the zero-shot flow's default
    if settings is None:
        settings = method.settings(**pick(args, method.settings))
    if method.name == raw_text.METHOD.name:  # the classifier flow's: the whole backbone, saved as a model
        return pretrain_text(TextArgs(**pick(args, TaptArgs), **dataclasses.asdict(settings)))
    if "zero_shot" not in method.flows:
        flows = list(method.flows)
        raise UserError(f"--method {method.name} serves the flow(s) {flows}; train runs zero_shot")
    return adapt_and_save(args, method, settings)[0]


def adapt_and_save(args: TrainArgs, method: Method, settings: Settings) -> tuple[dict, bool]:
    """(the record written to args.out's tapt.json, whether args.out is a PEFT adapter)."""
    spec, docs = args.sample.docs()
    base, options = args.model.base, args.options
    form = FormSettings(**pick(args, FormSettings))  # its own section, or the adapter section holding it
    models.check_base(base, "--base")
    if not models.is_decoder(base):  # before anything loads or trains: a prompt needs a causal LM
        raise UserError(
            f"--base {base} is an encoder, and --method {method.name} trains and scores prompts with a "
            "causal LM: name a causal LM (e.g. SmolLM2-135M-Instruct), or TAPT the encoder with "
            "--method raw-text (the classifier flow's)"
        )
    if not options.leak:
        docs = unlabeled(docs)  # the method never sees the gold answers it is not given
    with output.staged(Path(options.out), options.overwrite) as tmp, tempfile.TemporaryDirectory() as work:
        model = models.load_causal_lm(base, form.quantize, form.fallback_lora, form.bf16)
        tokenizer = models.tokenizer(base)
        adapted = method.run(Inputs(model, tokenizer, spec, docs, settings, args.sample.seed, Path(work)))
        why = nothing_learned(adapted.record)
        if why:
            raise UserError(
                f"{method.name} {why} of the {len(docs)} in {args.sample.split} "
                f"(subsample {args.sample.subsample}): "
                f"nothing was adapted and nothing is written; change its settings (`tapt-bench train "
                f"--method {method.name} --help` lists them)"
            )
        adapted.model.save_pretrained(tmp)
        peft = hasattr(adapted.model, "peft_config")
        if not peft:
            tokenizer.save_pretrained(tmp)
        rec = {
            "kind": "adapter" if peft else "model",
            "method": method.name,
            "method_settings": dataclasses.asdict(settings),
            **args.recorded(),
            "task": spec.slug,
            **adapted.record,
            "adapter_sha256": weights.adapter_sha256(adapted.model),
        }
        output.write_record(tmp, rec)
    return rec, peft
