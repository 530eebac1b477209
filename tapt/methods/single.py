"""One adaptation outside the grid (`tapt-bench train --method NAME`): a method run on one subsample
split and saved as a PEFT adapter dir (or, for a method that changes the base itself, a model dir)."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from harness.core import models, weights
from harness.core.errors import UserError
from harness.core.settings import Settings, flag, pick
from tapt import methods, output
from tapt.adapter import AdapterArgs
from tapt.methods import Inputs, Method, nothing_learned


def train(args: AdapterArgs, method: str | None = None, given: dict | None = None) -> dict:
    """`tapt-bench train`: adapt the base on one split with `method` (default: the zero_shot flow's
    default method, whose settings are the command's own flags; any other's come from `given`) and save
    it to args.out; returns the record written to its tapt.json."""
    chosen = methods.find(method or methods.for_flow("zero_shot"))
    if "zero_shot" not in chosen.flows:
        raise UserError(
            f"--method {chosen.name} serves the flow(s) {list(chosen.flows)}; train runs zero_shot"
        )
    if chosen.default_for == "zero_shot":
        if given:
            raise UserError(
                f"--method-settings: {chosen.name}'s settings are this command's own flags (--lr, "
                "--epochs, --batch-size, ...; `tapt-bench train --help` lists them); --method-settings is "
                "for other methods"
            )
        settings = chosen.settings(**pick(args, chosen.settings))
    else:
        default = methods.find(methods.for_flow("zero_shot"))
        flags = {f.name: f.default for f in dataclasses.fields(default.settings) if f.name != "quantize"}
        ignored = [flag(k) for k, v in pick(args, default.settings).items() if k in flags and v != flags[k]]
        if ignored:
            raise UserError(
                f"{', '.join(ignored)}: {default.name}'s flags, which {chosen.name} does not read; give its "
                f"settings as --method-settings (`tapt-bench methods show {chosen.name}` lists them)"
            )
        if given and list(given) == [chosen.name] and isinstance(given[chosen.name], dict):
            given = given[chosen.name]  # {method: {...}}, the shape run and calibrate take, for one method
        settings = chosen.configured(given, "--method-settings")
    return adapt_and_save(args, chosen, settings)[0]


def adapt_and_save(args: AdapterArgs, method: Method, settings: Settings) -> tuple[dict, bool]:
    """(the record written to args.out's tapt.json, whether args.out is a PEFT adapter)."""
    spec, docs = args.docs()
    models.check_base(args.base, "--base")
    if not args.answers:
        docs = docs.drop(columns="label")  # the method never sees the gold labels it is not given
    with output.staged(Path(args.out), args.overwrite) as tmp, tempfile.TemporaryDirectory() as work:
        model = models.load_causal_lm(args.base, args.quantize, args.fallback_lora, args.bf16)
        tokenizer = models.tokenizer(args.base)
        adapted = method.run(Inputs(model, tokenizer, spec, docs, settings, args.seed, Path(work)))
        why = nothing_learned(adapted.record)
        if why:
            where = "--epochs, --lr, ..." if method.default_for == "zero_shot" else "--method-settings"
            raise UserError(
                f"{method.name} {why} of the {len(docs)} in {args.split} (subsample {args.subsample}): "
                f"nothing was adapted and nothing is written; change its settings ({where})"
            )
        adapted.model.save_pretrained(tmp)
        peft = hasattr(adapted.model, "peft_config")
        if not peft:
            tokenizer.save_pretrained(tmp)
        rec = {
            "kind": "adapter" if peft else "model",
            "method": method.name,
            "method_settings": dataclasses.asdict(settings),
            **{k: v for k, v in dataclasses.asdict(args).items() if k not in ("out", "overwrite")},
            "task": spec.slug,
            **adapted.record,
            "adapter_sha256": weights.adapter_sha256(adapted.model),
        }
        output.write_record(tmp, rec)
    return rec, peft
