"""The seam between the grid and its flows: `Flow`, what the grid asks of a flow, and the flows by name
(FLOWS). A flow is one file: grid/unit/flows/ holds the built-ins (the zero-shot flow: prompt adapters,
scored zero-shot through lm-eval; the classifier flow: a classification head fine-tuned on the adapted
base), each module with a module-level `FLOW`; a flow from outside the package is named
`package.module:attr` or `path/to/file.py:attr`, or installed as an entry point of `tapt_bench.flows`.

A flow declares the config sections it brings beside the shared ones (`sections`, with their settings
classes: grid.configuration.config composes them), checks a config, a task and a base, computes a unit, and
says what a worker keeps loaded between units. The built-in flows' files are all imported as the config
module loads (grid.configuration.config composes their sections); a plug-in flow's when a config names it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

import pandas as pd

from harness.core.plumbing.errors import SettingsError
from harness.core.plumbing.plugins import PluginError, Registry, from_table
from harness.core.plumbing.sections import Sections
from harness.core.plumbing.settings import Settings
from harness.grid.grid_settings import GridSettings
from harness.grid.unit.unit_plan import SHARED_SECTIONS, UnitPlan
from harness.grid.unit.unit_record import Step, UnitRecord
from harness.tasks.protocol import Spec


@dataclass(frozen=True)
class Flow:
    """What the grid asks of a flow.

    sections: the config sections it brings beside the shared ones, name -> (settings class, title):
      recorded only in its units, carried by its units' plans (UnitPlan.section);
    default_method: the method it runs when a config names none (its results folder has no `+method`);
    check(config): a grid config's values against the flow, reading no file, raising SettingsError;
    check_task(spec) and check_base(path): why the task or the base cannot serve it, or None;
    compute(plan, keep_adapters): one unit's record, nothing written but kept adapters;
    null_model(plan, base_scored): the method adapted on a third draw (None: the flow has none);
    preload(plan): what a worker loads once and keeps for all its units (None: nothing);
    reads: the shared sections beyond grid, sample, model and statistic its units read (the base's form).
    A unit's plan carries the sections of `reads` and `sections`, and no other flow's."""

    name: str
    default_method: str
    check: Callable[[Sections], None]
    check_task: Callable[[Spec], str | None]
    check_base: Callable[[str], str | None]
    compute: Callable[[UnitPlan, bool], UnitRecord]
    null_model: Callable[[UnitPlan, pd.DataFrame], Step] | None = None
    preload: Callable[[UnitPlan], object] | None = None
    sections: dict[str, tuple[type[Settings], str]] = field(default_factory=dict)
    reads: tuple[str, ...] = ()


BUILT_IN = {  # name -> its Flow, in the order the docs show them; a new built-in flow: a row
    "classifier": "harness.grid.unit.flows.classifier:FLOW",
    "zero_shot": "harness.grid.unit.flows.zero_shot:FLOW",
}


def named(name: str) -> Flow | None:
    """The built-in flow of that name, its module imported alone; None where there is none."""
    return from_table(BUILT_IN, name)


@cache
def builtin() -> dict[str, Flow]:
    """Every built-in flow, in BUILT_IN's order."""
    return {name: named(name) for name in BUILT_IN}


FLOWS: Registry[Flow] = Registry("flow", Flow, builtins=lambda: builtin(), named=named)


def check_exposure_parts(grid: GridSettings, runs_them: bool) -> None:
    """CoDeC and plug-in scores are read within the zero-shot flow's exposure test: refused where the run
    does not compute them (`runs_them`), the same words in either flow. `grid`: the config's grid section."""
    if grid.codec_context and not runs_them:
        problem = "is CoDeC within the exposure test of the zero_shot flow: set exposure: true, or 0"
        raise SettingsError.of("codec_context", problem)
    if grid.scores and not runs_them:
        problem = "are computed within the exposure test of the zero_shot flow: set exposure: true"
        raise SettingsError.of("scores", problem)


def compute(plan: UnitPlan, keep_adapters: bool = False) -> UnitRecord:
    """One unit computed by its flow; nothing is written but kept adapters. A plug-in flow's failure, or
    anything but a UnitRecord it returns, is one line naming its file."""
    from harness.core.plumbing.plugins import called, where

    served = get(plan.grid.flow)
    record = called("flow", served.name, served.compute, plan, keep_adapters)
    if not isinstance(record, UnitRecord):
        raise SettingsError(
            f"flow {served.name!r} ({where(served.compute)}) returned {type(record).__name__} for "
            f"{plan.key.slug} subsample {plan.key.k}; its compute must return a UnitRecord (build it with "
            "harness.api.record_of): fix that file"
        )
    return record


def get(name: str) -> Flow:
    """The flow called `name`: a built-in, an installed entry point, or a plug-in's file or module
    (registered under its own name as well, so that its sections are known)."""
    try:
        found = FLOWS.find(name)
    except PluginError as err:
        raise SettingsError.of("flow", str(err)) from None
    if FLOWS.get(found.name) is not found:
        if found.name in builtin() or FLOWS.get(found.name) is not None:
            from harness.core.plumbing.plugins import where

            problem = (
                f"{name}: its Flow is named {found.name!r}, the name of another flow "
                f"({where(found.compute)}): name it otherwise"
            )
            raise SettingsError.of("flow", problem)
        known_method(found)
        unknown = [r for r in found.reads if r not in SHARED_SECTIONS]
        if unknown:
            from harness.core.plumbing.plugins import where

            problem = (
                f"{name} ({where(found.compute)}): its Flow reads {unknown}, no shared section; it may read "
                f"{sorted(SHARED_SECTIONS)}, and its own go in its `sections`: fix that file"
            )
            raise SettingsError.of("flow", problem)
        FLOWS.register(found)
    return found


def known_method(found: Flow) -> None:
    """A plug-in flow's default method is one: else its file is at fault, not a config's `method` key."""
    from tapt import methods

    try:
        methods.find(found.default_method)
    except SettingsError as err:
        from harness.core.plumbing.plugins import where

        raise SettingsError.of(
            "flow",
            f"{found.name!r} ({where(found.compute)}): its default_method {found.default_method!r} is not "
            f"a method ({err.problem}): fix that file",
        ) from None


def default_method(name: str) -> str:
    """The method the flow called `name` runs when a config names none."""
    return get(name).default_method


def section_readers() -> dict[str, tuple[str, ...]]:
    """Each flow-owned section -> the flows that read it (a section no flow owns is read by every flow)."""
    out: dict[str, tuple[str, ...]] = {}
    for flow in FLOWS.values():
        for section in flow.sections:
            out[section] = (*out.get(section, ()), flow.name)
    return out
