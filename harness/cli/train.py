"""`tapt-bench train` and `tapt-bench pretrain-text`: one TAPT run, and the lm_eval command that scores it."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from harness.cli.parsing import command
from harness.core.flags import mapping
from harness.core.settings import from_namespace


def cmd_train(args: argparse.Namespace) -> None:
    from harness.core.models import resolve
    from tapt.adapter import AdapterArgs
    from tapt.methods.single import train as adapt

    train = from_namespace(AdapterArgs, args)
    train.base = resolve(train.base)
    rec = adapt(train, args.method, args.method_settings)
    shown = ("sequences", "tokens", "learned_from", "steps", "final_loss", "seconds_per_step")
    print(
        f"{rec['method']}: {train.out}  "
        + "  ".join(
            f"{k} {rec[k]:.4g}" if isinstance(rec[k], float) else f"{k} {rec[k]}" for k in shown if k in rec
        )
    )
    out = Path(train.out).resolve()
    print(
        "evaluate it on the test split of the same subsample with:\n  "
        + lm_eval_command(train, f"peft={out}" if rec["kind"] == "adapter" else f"pretrained={out}")
    )


def lm_eval_command(train, model_args: str) -> str:
    """The lm_eval command that scores a model on a subsample's test split (its flags from the task: for
    a tapt_* task the subsample as --metadata, and --include_path where the task is not a shipped one;
    for any other lm-eval task its test rows as --samples). An adapter's base comes from its config."""
    from harness.tasks.protocol import find_spec

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
        "adapt a base on one subsample split, by default with the study's prompt TAPT (a (Q)LoRA adapter on "
        "the split's unlabeled prompts), and print the lm_eval command that scores it",
        AdapterArgs,
    )
    p.add_argument(
        "--method",
        default=None,
        help="the adaptation method (`tapt-bench methods list`; default: the study's prompt TAPT, whose "
        "settings are the flags above); another reads its settings from --method-settings, and of the "
        "flags above only the split's, the base's and quantize",
    )
    p.add_argument(
        "--method-settings",
        type=mapping,
        default={},
        help="its settings: a mapping as JSON or YAML, or a file of one (default: its own defaults)",
    )
    command(
        sub,
        "pretrain-text",
        cmd_pretrain_text,
        "the classifier flow's TAPT: pretrain all weights of an encoder (masked LM) or a decoder (causal LM) "
        "on a subsample split's raw texts",
        TextArgs,
    )
