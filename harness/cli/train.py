"""`tapt-bench train`: one TAPT run, and the lm_eval command that scores it."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from harness.cli.parsing import command
from harness.core.plumbing.errors import UserError
from harness.core.plumbing.settings import flag, from_namespace


def cmd_train(args: argparse.Namespace) -> None:
    from harness.core.engine import threads as thread_count
    from harness.core.engine.models import resolve
    from harness.results import folder_problem
    from tapt.methods.single import TrainArgs
    from tapt.methods.single import train as adapt

    if args.method_settings is not None:
        raise UserError(
            "--method-settings: train takes a method's settings as its flags (--epochs 2); `tapt-bench train "
            f"--method {args.method or 'NAME'} --help` lists them"
        )
    train = from_namespace(TrainArgs, args)
    out = train.options.out
    problem = folder_problem(out)
    if problem:  # before anything loads: a read-only folder, or a file where the folder goes
        raise UserError(f"--out {out}: {problem}")
    train = train.replace(base=resolve(train.model.base))
    thread_count.use(0)  # as `run` does: the cores no other program uses now (engine/threads.py)
    method = args.chosen_method  # found once, when the parser took its settings as flags
    rec = adapt(train, method, from_namespace(method.settings, args))
    if rec["kind"] == "text":  # a backbone for the classifier flow, which trains a head on it
        say_pretrained(out, rec)
        return
    shown = ("sequences", "tokens", "learned_from", "steps", "final_loss", "seconds_per_step")
    print(
        f"{rec['method']}: {out}  "
        + "  ".join(
            f"{k} {rec[k]:.4g}" if isinstance(rec[k], float) else f"{k} {rec[k]}" for k in shown if k in rec
        )
    )
    where = Path(out).resolve()
    model_args = f"peft={where}" if rec["kind"] == "adapter" else f"pretrained={where}"
    print(
        "evaluate it on the test split of the same subsample with:\n  "
        + lm_eval_command(train.sample, model_args)
    )


def method_named(argv: list[str] | None) -> str | None:
    """The method a `train` command line names (`--method NAME`): its settings are that command's flags."""
    argv = list(argv or [])
    if not argv or argv[0] != "train":
        return None
    for i, word in enumerate(argv):
        if word == "--method" and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith("--method="):
            return word.split("=", 1)[1]
    return None


def lm_eval_command(sample, model_args: str) -> str:
    """The lm_eval command that scores a model on a subsample's test split (its flags from the task: for
    a tapt_* task the subsample as --metadata, and --include_path where the task is not a shipped one;
    for any other lm-eval task its test rows as --samples). An adapter's base comes from its config."""
    from harness.tasks.protocol import find_spec

    spec = find_spec(sample.task, sample.include_path)
    return shlex.join(["lm_eval", "--model", "hf", "--model_args", model_args, *spec.lm_eval_args(sample)])


def say_pretrained(out: str, rec: dict) -> None:
    print(
        f"model: {out}  objective {rec['objective']}  epochs {rec['epochs']}  sequences "
        f"{rec['sequences']}  "
        f"loss {rec['losses'][0]:.4f} -> {rec['final_loss']:.4f}  {rec['seconds_per_step']:.2f} s/step"
    )


def check_no_clash(method) -> None:
    """A method's setting that shares a name with one of train's own (TrainArgs) is read from that one
    flag: refused unless it is the same setting (the base's form), of the same type."""
    import typing

    from harness.core.plumbing.settings import field_names
    from tapt.methods.single import TrainArgs

    ours, theirs = TrainArgs.hints(), typing.get_type_hints(method.settings)
    both = set(field_names(TrainArgs)) & set(field_names(method.settings))
    clash = sorted(k for k in both if ours[k] != theirs[k])
    if clash:
        raise UserError(
            f"method {method.name}: its setting(s) {clash} share a name with train's own flags and differ "
            f"from them; rename them in its settings class ({method.settings.__name__})"
        )


def every_methods_flags() -> set[str]:
    """The flags of every built-in method's settings (`--packing`): another method's setting is named."""
    from harness.core.plumbing.settings import field_names
    from tapt.methods.registry import builtin

    return {flag(f) for m in builtin().values() for f in field_names(m.settings)}


def add_commands(sub, method: str | None = None) -> None:
    """The commands; `train`'s flags hold `method`'s settings (default: the study's prompt TAPT)."""
    from harness.core.plumbing.flags import add_settings
    from harness.grid.unit.flow import default_method
    from tapt import methods
    from tapt.methods.single import TrainArgs

    chosen = methods.find(method or default_method("zero_shot"))
    p = command(
        sub,
        "train",
        cmd_train,
        "adapt a base on one subsample split, by default with the study's prompt TAPT (a (Q)LoRA adapter on "
        "the split's unlabeled prompts), and print the lm_eval command that scores it",
        TrainArgs,
    )
    p.add_argument(
        "--method",
        default=None,
        help="the adaptation method (`tapt-bench methods list`; default: the study's prompt TAPT); its "
        "settings are the flags below (`tapt-bench train --method NAME --help` lists another's)",
    )
    p.add_argument("--method-settings", default=None, help=argparse.SUPPRESS)  # refused: the flags are
    p.set_defaults(chosen_method=chosen)
    p.other_flags = every_methods_flags  # read only to explain an unrecognized flag
    check_no_clash(chosen)
    group = p.add_argument_group(f"{chosen.name}'s settings")
    p.flags |= add_settings(group, chosen.settings, skip=set(p.flags))
