"""The study's layout of a unit's record, kept so that every result recorded before the methods' settings
moved under `method_settings` keeps its settings hash and its folder.

A config writes every method's settings one way: `method_settings: {method: {key: value}}`. The first
results were recorded before that, when the flow's default method (prompt TAPT for zero_shot, raw-text
TAPT for classifier) kept its settings among the grid's own keys. So its record still lays them flat, and
its units stay in the folder named by the base alone; another method's record holds `method` and
`method_settings`, in `<base>+<method>`. This module is the one place that knows it."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

from harness.core.engine.models import FormSettings
from harness.core.plumbing.errors import SettingsError
from harness.core.plumbing.sections import recorded
from harness.core.plumbing.settings import Settings, did_you_mean, field_names
from harness.grid.unit.flow import builtin, default_method
from tapt import methods
from tapt.adapter import LoraTrainingSettings

FORM = tuple(field_names(FormSettings))  # the base's form: top-level keys, for every method alike
# the keys the base's scores never depend on: the first records kept the study method's training keys
# (without bf16) out of the base's settings, and only those
TRAINING_KEYS = tuple(k for k in field_names(LoraTrainingSettings) if k not in FORM)
METHOD_KEYS = ("method", "method_settings", "conditions", "stream_chunks", "stream_mode", "stream_chunk_size")
METHOD_KEYS += ("method_code",)  # a plug-in method's file (resolve.plugin_code)


class SettingsNote(UserWarning):
    """A config written in an older spelling, read as the new one."""


def is_default(flow: str, method: str) -> bool:
    """Whether `method` is the flow's default (the study's method for it), whose record is laid flat."""
    return method == default_method(flow)


def tag(flow: str, method: str, name: str) -> str:
    """The results folder of a model: the base's name, with `+method` for a method other than the flow's
    default (the analysis reads it as the LM type)."""
    return name if is_default(flow, method) else f"{name}+{method}"


def record(flow: str, method: str, settings: Settings, grid: dict[str, Any]) -> dict[str, Any]:
    """A unit's recorded settings: the grid's recorded keys (`grid`) with the method's, laid out as the
    first results were (see the module's note)."""
    own = recorded(settings)
    if not is_default(flow, method):
        return grid | {"method": method, "method_settings": own}
    for key in set(own) & set(grid):  # the form: a study method's record holds it once
        if own[key] != grid[key]:
            problem = (
                f"{method}: {key} {own[key]!r}, and the top-level {key} is {grid[key]!r}: the base's form "
                f"is one top-level key for every method; set {key} there"
            )
            raise SettingsError.of("method_settings", problem)
    return grid | own


def base_record(result: dict[str, Any]) -> dict[str, Any]:
    """The recorded settings that can change the base's own scores: a unit's without the method's (methods
    side by side with equal base settings share the base's scores)."""
    return {k: v for k, v in result.items() if k not in (*METHOD_KEYS, *TRAINING_KEYS)}


def read_old_keys(raw: dict, known: set[str], source: str) -> dict:
    """A config's top-level keys that are a flow's default method's settings (the older spelling, such as
    `epochs: 2`): moved under `method_settings` where the config runs that method, dropped where it does
    not (they never applied), with a note either way; a key set both ways is refused."""
    flow = raw.get("flow", "zero_shot")
    if flow not in builtin():
        return raw  # a plug-in flow takes no older keys; an unknown one is named by the flow's own check
    default = methods.find(default_method(flow))
    defaults = {methods.find(default_method(f)) for f in builtin()}
    flat = [k for k in raw if k not in known and any(k in field_names(m.settings) for m in defaults)]
    typos = [k for k in raw if k not in known and k not in flat and not did_you_mean([k], known)]
    near = did_you_mean(typos, field_names(default.settings))
    if near:  # a misspelt older key: named with where the key belongs now
        problem = f"unknown key(s) {sorted(typos)}{near}: {default.name}'s settings go under method_settings"
        raise SettingsError(f"{source}: {problem}", "method_settings", problem)
    try:
        runs = default.name in {methods.find(n).name for n in run_methods(raw)}
    except (SettingsError, TypeError):
        return raw  # the config's own check names the method
    old = {k: raw[k] for k in flat if runs and k in field_names(default.settings)}
    unused = sorted(set(flat) - set(old))
    if unused:
        note = f"{source}: {unused} are settings of a method this config does not run; they never applied"
        warnings.warn(note, SettingsNote, stacklevel=3)
        raw = {k: v for k, v in raw.items() if k not in unused}
    sections = raw.get("method_settings") or {}
    if not old or not isinstance(sections, dict):
        return raw  # (a method_settings that is not a mapping: its type check names it)
    section = sections.get(default.name) or {}
    both = sorted(set(old) & set(section)) if isinstance(section, dict) else []
    if both:
        problem = f"{both} are written at the top level and under method_settings.{default.name}; keep one"
        raise SettingsError(f"{source}: {problem}", "method_settings", problem)
    written = ", ".join(f"{k}: {v!r}" for k, v in old.items())
    warnings.warn(
        f"{source}: {sorted(old)} are {default.name}'s settings; write them under method_settings "
        f"(method_settings: {{{default.name}: {{{written}}}}}). Read as such: the same run and hash.",
        SettingsNote,
        stacklevel=3,
    )
    rest = {k: v for k, v in raw.items() if k not in old}
    merged = {**sections, default.name: {**section, **old}} if isinstance(section, dict) else sections
    return rest | {"method_settings": merged}


def run_methods(raw: dict) -> list[str]:
    """The methods a config's keys run: `methods`, or `method`, or the flow's default."""
    return raw.get("methods") or [raw.get("method") or default_method(raw.get("flow", "zero_shot"))]


def task_keys(method: type[Settings], values: dict[str, Any]) -> dict[str, Any]:
    """A task's overrides that are the method's own settings."""
    own = {f.name for f in dataclasses.fields(method)}
    return {k: v for k, v in values.items() if k in own}
