"""What every training run shares: the sequence length, the precision choice, one TrainingArguments
builder, the step log."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from harness.core.plumbing.errors import UserError


class TrainingDivergedError(UserError):
    """The training loss became NaN or infinite."""


def use_bf16() -> bool:
    """bf16 by default only on a GPU that supports it (on a CPU it is opt-in: it moves the numbers)."""
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def arguments(
    workdir: Path,
    epochs: float,
    lr: float,
    batch_size: int,
    seed: int,
    cls=None,
    bf16: bool = False,
    **extra,
):
    """TrainingArguments (or a subclass such as TRL's SFTConfig, as `cls`) with the settings every run
    shares: explicit precision (`bf16`: autocast on a CPU too), no gradient checkpointing unless `extra`
    asks, a log line per step, no checkpoints, no reporting."""
    from transformers import TrainingArguments

    extra = {"gradient_checkpointing": False, **extra}
    return (cls or TrainingArguments)(
        output_dir=str(workdir / "trainer"),
        num_train_epochs=epochs,
        learning_rate=lr,
        per_device_train_batch_size=batch_size,
        bf16=use_bf16() or bf16,
        fp16=False,
        logging_steps=1,
        logging_nan_inf_filter=False,
        save_strategy="no",
        report_to="none",
        seed=seed,
        data_seed=seed,
        use_cpu=not torch.cuda.is_available(),
        **extra,
    )


class StepLog(TrainerCallback):
    """Records the loss of every logging step and the wall time of every step; stops on NaN loss."""

    def __init__(self, fix: str = "lower --lr") -> None:
        self.fix = fix  # what the user can change, in the words of the command that set it
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
            raise TrainingDivergedError(
                f"training loss became {loss} at step {state.global_step}; {self.fix} (lr now "
                f"{args.learning_rate})"
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
