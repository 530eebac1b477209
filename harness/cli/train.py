"""`tapt-bench train` and `tapt-bench pretrain-text`: one TAPT run, and the lm_eval command that scores it."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from harness.cli.parsing import command
from harness.core.errors import UserError, read_json_object
from harness.core.settings import from_namespace


def cmd_train(args: argparse.Namespace) -> None:
    from harness.core.models import resolve
    from tapt.adapter import AdapterArgs, train_adapter

    train = from_namespace(AdapterArgs, args)
    train.base = resolve(train.base)
    if args.method != "prompt-tapt":
        return train_method(args, train)
    if json_value(args.method_settings) != {}:
        raise UserError(
            "--method-settings: prompt-tapt's settings are this command's own flags (--lr, --epochs, "
            "--batch-size, ...; see `tapt-bench train --help`); --method-settings is for other methods"
        )
    rec = train_adapter(train)
    print(
        f"adapter: {train.out}  sequences {rec['sequences']}  tokens {rec['tokens']}  steps {rec['steps']}  "
        f"loss {rec['losses'][0]:.4f} -> {rec['final_loss']:.4f}  {rec['seconds_per_step']:.2f} s/step"
    )
    model_args = f"pretrained={train.base},peft={Path(train.out).resolve()}"
    print(
        "evaluate it on the test split of the same subsample with:\n  " + lm_eval_command(train, model_args)
    )


def train_method(args: argparse.Namespace, train) -> None:
    """`train --method NAME`: another method on the same split, its settings from --method-settings."""
    from tapt import methods
    from tapt.methods.single import adapt_and_save

    method = methods.find(args.method)
    if "zero_shot" not in method.flows:
        raise UserError(
            f"--method {method.name} serves the flow(s) {list(method.flows)}; train runs zero_shot"
        )
    given = json_value(args.method_settings)
    if not isinstance(given, dict):
        raise UserError(
            f"--method-settings: a JSON object was expected, got {type(given).__name__} "
            f"({args.method_settings!r}); give a JSON object or a file of one"
        )
    settings = method.configured(given, "--method-settings")
    rec, peft = adapt_and_save(train, method, settings)
    print(
        f"{method.name}: {train.out}  "
        + "  ".join(f"{k} {rec[k]}" for k in ("steps", "final_loss") if k in rec)
    )
    out = Path(train.out).resolve()
    model_args = f"pretrained={train.base},peft={out}" if peft else f"pretrained={out}"
    print(
        "evaluate it on the test split of the same subsample with:\n  " + lm_eval_command(train, model_args)
    )


def json_value(text: str):
    """--method-settings: inline JSON (anything that parses as JSON), else a file holding an object."""
    fix = "give a JSON object or a file of one"
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as err:
        if stripped[:1] in '{["' or not Path(stripped).is_file():
            where = "not valid JSON" if stripped[:1] in '{["' else "neither valid JSON nor a file"
            raise UserError(f"--method-settings {text!r}: {where} ({err}); {fix}") from None
    return read_json_object(stripped, f"--method-settings {stripped}", fix)


def lm_eval_command(train, model_args: str) -> str:
    """The lm_eval command that scores a model on a subsample's test split (its flags from the task:
    for a tapt_* task its folder and the subsample as --metadata, for any other lm-eval task its test
    rows as --samples); lm-eval needs the base as `pretrained=` and an adapter as `peft=`."""
    from harness.tasks.splits import find_spec

    spec = find_spec(train.task, train.include_path)
    return shlex.join(["lm_eval", "--model", "hf", "--model_args", model_args, *spec.lm_eval_args(train)])


def cmd_pretrain_text(args: argparse.Namespace) -> None:
    from harness.core.models import resolve
    from tapt.raw_text import TextArgs, pretrain_text

    train = from_namespace(TextArgs, args)
    train.base = resolve(train.base)
    rec = pretrain_text(train)
    print(
        f"model: {train.out}  objective {rec['objective']}  epochs {rec['epochs']}  sequences "
        f"{rec['sequences']}  "
        f"loss {rec['losses'][0]:.4f} -> {rec['final_loss']:.4f}  {rec['seconds_per_step']:.2f} s/step"
    )


def register(sub) -> None:
    from tapt.adapter import AdapterArgs
    from tapt.raw_text import TextArgs

    p = command(
        sub,
        "train",
        cmd_train,
        "TAPT: train a (Q)LoRA adapter on a subsample split's unlabeled prompts (or adapt with --method)",
        AdapterArgs,
    )
    p.add_argument(
        "--method",
        default="prompt-tapt",
        help="the adaptation method (`tapt-bench methods list`); another than prompt-tapt reads its "
        "settings from --method-settings, and of the flags above only the split's, the base's and quantize",
    )
    p.add_argument("--method-settings", default="{}", help="its settings: a JSON object, or a file of one")
    command(
        sub,
        "pretrain-text",
        cmd_pretrain_text,
        "classifier TAPT: MLM (encoder) or CLM (decoder) on raw texts",
        TextArgs,
    )
