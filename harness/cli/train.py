"""`tapt-bench train` and `tapt-bench pretrain-text`: one TAPT run, and the lm_eval command that scores it."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from harness.cli.parsing import command
from harness.core.settings import from_namespace


def cmd_train(args: argparse.Namespace) -> None:
    from harness.core.models import resolve
    from tapt.adapter import AdapterArgs, train_adapter

    train = from_namespace(AdapterArgs, args)
    train.base = resolve(train.base)
    rec = train_adapter(train)
    print(
        f"adapter: {train.out}  sequences {rec['sequences']}  tokens {rec['tokens']}  steps {rec['steps']}  "
        f"loss {rec['losses'][0]:.4f} -> {rec['final_loss']:.4f}  {rec['seconds_per_step']:.2f} s/step"
    )
    print("evaluate it on the test split of the same subsample with:\n  " + lm_eval_command(train))


def lm_eval_command(train) -> str:
    """The lm_eval command that scores an adapter on its subsample's test split (lm-eval needs the
    base as `pretrained=`, the adapter as `peft=`, and the task's folder as --include_path)."""
    from harness.tasks.data import resolve_data_dir
    from harness.tasks.spec import load_task_config, task_path

    yaml = task_path(train.task, train.include_path).resolve()
    data_dir = resolve_data_dir(train.data_dir)
    metadata = {
        "data_dir": str(data_dir.resolve()) if data_dir else None,
        "m": train.m,
        "n": train.n,
        "seed": train.seed,
        "subsample": train.subsample,
        "split": "test",
    }
    model_args = f"pretrained={train.base},peft={Path(train.out).resolve()}"
    task = load_task_config(yaml)["task"]
    argv = ["lm_eval", "--model", "hf", "--model_args", model_args, "--include_path", str(yaml.parent)]
    return shlex.join([*argv, "--tasks", task, "--metadata", json.dumps(metadata)])


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

    command(
        sub,
        "train",
        cmd_train,
        "TAPT: train a (Q)LoRA adapter on a subsample split's unlabeled prompts",
        AdapterArgs,
    )
    command(
        sub,
        "pretrain-text",
        cmd_pretrain_text,
        "classifier TAPT: MLM (encoder) or CLM (decoder) on raw texts",
        TextArgs,
    )
