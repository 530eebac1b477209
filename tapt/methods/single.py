"""One adaptation outside the grid (`tapt-bench train --method NAME`): a method run on one subsample
split and saved as a PEFT adapter dir (or, for a method that changes the base itself, a model dir)."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from harness.core import models
from harness.core.errors import UserError
from harness.core.settings import Settings
from tapt import output
from tapt.adapter import AdapterArgs
from tapt.methods import Inputs, Method, nothing_learned


def adapt_and_save(args: AdapterArgs, method: Method, settings: Settings) -> tuple[dict, bool]:
    """(the record written to args.out's tapt.json, whether args.out is a PEFT adapter)."""
    spec, docs = args.docs()
    models.check_base(args.base, "--base")
    if not args.answers:
        docs = docs.drop(columns="label")  # the method never sees the gold labels it is not given
    with output.staged(Path(args.out), args.overwrite) as tmp, tempfile.TemporaryDirectory() as work:
        model = models.load_causal_lm(args.base, args.quantize, args.fallback_lora)
        tokenizer = models.tokenizer(args.base)
        adapted = method.run(Inputs(model, tokenizer, spec, docs, settings, args.seed, Path(work)))
        why = nothing_learned(adapted.record)
        if why:
            raise UserError(
                f"{method.name} {why} of the {len(docs)} in {args.split} (subsample {args.subsample}): "
                f"nothing was adapted and nothing is written; change its settings (--method-settings)"
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
        }
        output.write_record(tmp, rec)
    return rec, peft
