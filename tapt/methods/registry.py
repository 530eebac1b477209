"""Where methods are found: the built-ins (BUILT_IN), the entry points of the group `tapt_bench.methods`,
and `package.module:attr` or `path/to/file.py:attr`; each checked before it runs."""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

from harness.core.plumbing.errors import SettingsError
from harness.core.plumbing.plugins import PluginError, Registry, from_table
from harness.core.plumbing.settings import Settings
from tapt.methods.contract import NAME, Method

BUILT_IN = {  # name -> its Method, in the order `methods list` and the docs show them; a new built-in: a row
    "prompt-tapt": "tapt.methods.prompt_tapt:METHOD",
    "raw-text": "tapt.methods.raw_text:METHOD",
    "test-time-learning": "tapt.methods.tlm:METHOD",
    "self-training": "tapt.methods.self_training:METHOD",
    "test-time-rl": "tapt.methods.test_time_rl:METHOD",
}


def built_in(name: str) -> Method | None:
    """The built-in method of that name, its module imported alone (no torch: a method imports it as it
    runs); None where there is none."""
    return from_table(BUILT_IN, name)


@cache
def builtin() -> dict[str, Method]:
    """Every built-in method, in BUILT_IN's order."""
    return {name: built_in(name) for name in BUILT_IN}


def sourced(value: Method, target: str) -> Method:
    """A method from outside the package, checked, with where it came from as its `source`."""
    check_method(value, target)
    module, _, attr = target.rpartition(":")
    names = [n for n, t in METHODS.installed().items() if t == target]
    if names:
        source = f"entry point {names[0]} ({target})"
    elif module.endswith(".py"):
        source = f"{Path(module).resolve()}:{attr}"
    else:
        source = target
    return dataclasses.replace(value, source=source)


METHODS: Registry[Method] = Registry(
    "method",
    Method,
    builtins=lambda: builtin(),
    check=sourced,
    named=built_in,
)


def find(name: str) -> Method:
    """A method by built-in name, installed entry-point name, `package.module:attr` or `file.py:attr`
    (METHODS.find), its errors on the config's `method` key."""
    try:
        return METHODS.find(name)
    except PluginError as err:
        raise SettingsError.of("method", str(err)) from None


def check_method(value: Method, target: str) -> None:
    """A Method's own fields, checked before it runs: a name that is a safe folder name, its flows' names, a
    Settings dataclass, a callable adapt."""
    problems = []
    if not isinstance(value.name, str) or not NAME.fullmatch(value.name):
        problems.append(
            f"its name {value.name!r} must be letters, digits, '.', '_' or '-' (it names a results folder)"
        )
    if (
        not isinstance(value.flows, tuple)
        or not value.flows
        or not all(isinstance(f, str) for f in value.flows)
    ):
        problems.append(
            f"its flows {value.flows!r} must be a tuple of the grid's flow names (zero_shot, ...)"
        )
    if not (isinstance(value.settings, type) and issubclass(value.settings, Settings)):
        problems.append(
            f"its settings {value.settings!r} must be a dataclass subclassing harness.api.Settings"
        )
    if not callable(value.adapt):
        problems.append("its adapt must be a function of Inputs returning Adapted")
    shown = value.diagnostics
    if not isinstance(shown, dict) or not all(isinstance(x, str) and x for x in [*shown, *shown.values()]):
        problems.append(f"its diagnostics {shown!r} must map record keys to column names, both strings")
    if problems:
        problem = f"{target!r}: " + "; ".join(problems)
        raise SettingsError.of("method", problem)
