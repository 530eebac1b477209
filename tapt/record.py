"""What every TAPT run shares: output handling, device precision, step timing, NaN guard, tapt.json."""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from harness.spec import TaskError

LIBRARIES = ("torch", "transformers", "trl", "peft", "bitsandbytes", "datasets", "lm_eval", "accelerate")


class TrainingDiverged(TaskError):
    """The training loss became NaN or infinite."""


@contextmanager
def staged(out: Path, overwrite: bool) -> Iterator[Path]:
    """A fresh dir beside `out` to write into; moved into place only if the block succeeds.

    Refuses an existing `out` unless `overwrite`; an old `out` survives any failure.
    """
    if out.exists() and not overwrite:
        raise TaskError(f"output {out} exists; pass --overwrite to replace it")
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(tmp / "trainer", ignore_errors=True)  # the Trainer's scratch dir
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)


def use_bf16() -> bool:
    """bf16 only on a GPU that supports it; on CPU fp32 is several times faster to train here."""
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def check_base(base: str) -> None:
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(base)
    except (OSError, ValueError) as err:
        raise TaskError(
            f"base model {base!r} not found: not a local model dir and not loadable from the hub ({err})"
        ) from err


def tokenizer(base: str):
    """The base's tokenizer, padding with EOS where it has no pad token."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


class StepLog(TrainerCallback):
    """Records the loss of every logging step and the wall time of every step; stops on NaN loss."""

    def __init__(self) -> None:
        self.losses: list[float] = []
        self.step_seconds: list[float] = []
        self._start = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.step_seconds.append(time.perf_counter() - self._start)

    def on_log(self, args, state, control, logs=None, **kwargs):
        loss = (logs or {}).get("loss")
        if loss is None:
            return
        if not math.isfinite(loss):
            raise TrainingDiverged(
                f"training loss became {loss} at step {state.global_step}; lower --lr (now {args.learning_rate})"
            )
        self.losses.append(float(loss))

    def summary(self) -> dict[str, Any]:
        steps = self.step_seconds[1:] or self.step_seconds  # the first step includes warm-up
        return {
            "losses": self.losses,
            "final_loss": self.losses[-1] if self.losses else None,
            "steps": len(self.step_seconds),
            "seconds_per_step": sum(steps) / len(steps) if steps else None,
        }


def library_versions() -> dict[str, str]:
    found = {}
    for lib in LIBRARIES:
        try:
            found[lib] = version(lib.replace("_", "-"))
        except PackageNotFoundError:
            found[lib] = "not installed"
    return found


def write_record(out_dir: Path, record: dict[str, Any]) -> None:
    (out_dir / "tapt.json").write_text(json.dumps({**record, "versions": library_versions()}, indent=2))
