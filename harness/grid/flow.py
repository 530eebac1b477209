"""The seam between the grid and its flows: `Flow`, what the grid asks of a flow, and the flows by name.
Each flow is one file of harness/grid/flows/: the zero-shot flow (prompt adapters, scored zero-shot
through lm-eval) and the classifier flow (a classification head fine-tuned on the adapted base).

A flow's file is imported when the flow is first named (a lazy mapping, as lm-eval finds its models), so
that the config's checks can ask a flow without importing what its units run."""

from __future__ import annotations

import importlib
import typing
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from harness.core.errors import SettingsError
from harness.core.sections import Sections
from harness.grid.grid_settings import FlowName, GridSettings
from harness.grid.unit_plan import UnitPlan
from harness.grid.unit_record import Step, UnitRecord
from harness.tasks.protocol import Spec

NAMES: tuple[str, ...] = typing.get_args(FlowName)  # each a file of harness/grid/flows/; a method names those
# it serves (Method.flows)


@dataclass(frozen=True)
class Flow:
    """What the grid asks of a flow.

    sections: the config sections it reads beyond the shared ones (recorded only in its units);
    default_method: the method it runs when a config names none (its results folder has no `+method`);
    check(config): a grid config's values against the flow, no I/O, raising SettingsError;
    check_task(spec) and check_base(path): why the task or the base cannot serve it, or None;
    compute(plan, keep_adapters): one unit's record, nothing written but kept adapters;
    null_model(plan, base_scored): the method adapted on a third draw (None: the flow has none);
    keeps_base: whether a worker loads the base once and keeps it for all its units."""

    name: str
    sections: tuple[str, ...]
    default_method: str
    check: Callable[[Sections], None]
    check_task: Callable[[Spec], str | None]
    check_base: Callable[[str], str | None]
    compute: Callable[[UnitPlan, bool], UnitRecord]
    null_model: Callable[[UnitPlan, pd.DataFrame], Step] | None
    keeps_base: bool


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
    """One unit computed by its flow; nothing is written but kept adapters."""
    return get(plan.grid.flow).compute(plan, keep_adapters)


def get(name: str) -> Flow:
    """The flow called `name` (its file imported on first use)."""
    if name not in NAMES:
        raise KeyError(f"no flow {name!r}: the flows are {', '.join(NAMES)}")
    return importlib.import_module(f"harness.grid.flows.{name}").FLOW


def default_method(name: str) -> str:
    """The method the flow called `name` runs when a config names none."""
    return get(name).default_method


def section_readers() -> dict[str, tuple[str, ...]]:
    """Each flow-owned section -> the flows that read it (a section no flow owns is read by every flow)."""
    out: dict[str, tuple[str, ...]] = {}
    for flow in map(get, NAMES):
        for section in flow.sections:
            out[section] = (*out.get(section, ()), flow.name)
    return out
