"""Adaptation methods the design audits: each adapts the loaded base on one split's documents, once per
condition (extra, test, leak), and the unit scores what it returns.

A method is a `Method` value: its name, the flows it serves, its settings dataclass and one `adapt`
call. The built-ins are in `builtin()`; a method from outside the package is named
`package.module:attr` or `path/to/file.py:attr` (a `Method` value), or installed as an entry point of
the group `tapt_bench.methods`, as lm-eval's models and pytest's plugins are. The documents an `adapt`
call receives carry the gold `label` column only for the `leak` condition: every other condition gets
them without it.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from harness.core.errors import SettingsError, UserError
from harness.core.settings import Settings
from harness.tasks.splits import Spec

ENTRY_POINTS = "tapt_bench.methods"
FLOWS = ("zero_shot", "classifier")


@dataclass
class Inputs:
    """What a method adapts on: the base and the documents of one split for one condition."""

    model: Any  # zero_shot: the loaded causal LM (adapt it in place, e.g. with PEFT); classifier: its dir
    tokenizer: Any
    spec: Spec  # the task: prompts, choices and the answer delimiter
    docs: pd.DataFrame  # text, prompt, choices, row; `label` only for the leak condition
    settings: Settings  # an instance of the method's settings class
    seed: int
    workdir: Path  # scratch (a Trainer's output_dir); removed after the condition

    @property
    def labeled(self) -> bool:
        return "label" in self.docs


@dataclass
class Adapted:
    """An adapted model (scored as the condition's model) and what made it. `restore` returns the
    base for the next condition; by default a PEFT model's `unload()` (the adapter detached)."""

    model: Any  # zero_shot: a causal LM; classifier: the dir of the adapted backbone
    record: dict = field(default_factory=dict)  # JSON-able: steps, losses, what was selected
    restore: Callable[[], Any] | None = None

    def base(self) -> Any:
        if self.restore is not None:
            return self.restore()
        return self.model.unload() if hasattr(self.model, "unload") else self.model


@dataclass(frozen=True)
class Method:
    """One adaptation method: `adapt(Inputs) -> Adapted` with settings of class `settings`."""

    name: str
    flows: tuple[str, ...]
    settings: type[Settings]
    adapt: Callable[[Inputs], Adapted]
    about: str = ""
    source: str = "built in"

    def run(self, inputs: Inputs) -> Adapted:
        """`adapt`, with a method's own failure named as its own."""
        try:
            out = self.adapt(inputs)
        except (UserError, KeyboardInterrupt):
            raise
        except Exception as err:
            raise UserError(
                f"method {self.name} ({self.source}) failed: {type(err).__name__}: {err}"
            ) from err
        if not isinstance(out, Adapted):
            raise UserError(
                f"method {self.name} ({self.source}) returned {type(out).__name__}; adapt must return "
                "tapt.methods.Adapted(model, record)"
            )
        return out

    def configured(self, values: dict | None, where: str) -> Settings:
        """The method's settings from a mapping (a config's `method_settings: {name: {...}}`)."""
        from harness.core.settings import from_mapping

        return from_mapping(self.settings, values or {}, where)


def builtin() -> dict[str, Method]:
    from tapt.methods import prompt_tapt, raw_text, self_training, tlm

    return {m.name: m for m in (prompt_tapt.METHOD, raw_text.METHOD, tlm.METHOD, self_training.METHOD)}


@cache
def installed() -> dict[str, str]:
    """Entry points of the group `tapt_bench.methods`: name -> `module:attr`."""
    from importlib.metadata import entry_points

    return {e.name: e.value for e in entry_points(group=ENTRY_POINTS)}


def find(name: str) -> Method:
    """A method by built-in name, installed entry-point name, `package.module:attr` or `file.py:attr`."""
    if name in builtin():
        return builtin()[name]
    target = installed().get(name, name)
    if ":" not in target:
        known = ", ".join([*builtin(), *installed()])
        problem = (
            f"must be a built-in or installed method ({known}), `package.module:attr` or "
            f"`path/to/file.py:attr`, got {name!r}"
        )
        raise SettingsError(f"method {problem}", "method", problem)
    module, _, attr = target.rpartition(":")
    try:
        value = getattr(load_module(module), attr)
    except (ImportError, AttributeError, OSError) as err:
        fix = "check the path" if module.endswith(".py") else "put its folder on PYTHONPATH"
        problem = f"{target!r} cannot be imported ({type(err).__name__}: {err}); {fix}"
        raise SettingsError(f"method {problem}", "method", problem) from None
    if not isinstance(value, Method):
        problem = f"{target!r} is a {type(value).__name__}, not a tapt.methods.Method"
        raise SettingsError(f"method {problem}", "method", problem)
    source = f"entry point {name}" if name in installed() else target
    return dataclasses.replace(value, source=source)


def load_module(module: str):
    """An importable module by name, or a Python file by path (`my_method.py`, run once per process)."""
    if not module.endswith(".py"):
        return importlib.import_module(module)
    return _load_file(Path(module).resolve())


@cache
def _load_file(path: Path):
    if not path.is_file():
        raise ImportError(f"no such file {path}")
    spec = importlib.util.spec_from_file_location(f"tapt_bench_user_{path.stem}", path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def for_flow(flow: str) -> str:
    """The study's method of a flow (the default of `method`)."""
    return "prompt-tapt" if flow == "zero_shot" else "raw-text"
