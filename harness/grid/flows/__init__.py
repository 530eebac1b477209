"""The grid's flows, each one file behind one interface (`Flow`): the zero-shot flow (prompt adapters, scored
zero-shot through lm-eval) and the classifier flow (a classification head fine-tuned on the adapted base).

A flow's file is imported when the flow is first named (a lazy mapping, as lm-eval finds its models), so
that the config's checks can ask a flow without importing what its units run."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tapt.methods import FLOWS as NAMES  # the flows a method may declare it serves


@dataclass(frozen=True)
class Flow:
    """What the grid asks of a flow.

    sections: the config sections it reads beyond the shared ones (recorded only in its units);
    default_method: the method it runs when a config names none (its results folder has no `+method`);
    check(config): its keys' values against the flow, no I/O, raising SettingsError;
    check_task(spec) and check_base(path): why the task or the base cannot serve it, or None;
    unit(planned, keep_adapters) -> Unit: one (task, subsample) unit, nothing written but kept adapters;
    null_model(planned, base_scored): the method adapted on a third draw (None: the flow has none);
    keeps_base: whether a worker loads the base once and keeps it for all its units."""

    name: str
    sections: tuple[str, ...]
    default_method: str
    check: Callable[[Any], None]
    check_task: Callable[[Any], str | None]
    check_base: Callable[[str], str | None]
    unit: Callable[..., Any]
    null_model: Callable[..., Any] | None
    keeps_base: bool


def check_exposure_parts(cfg: Any, runs_them: bool) -> None:
    """CoDeC and plug-in scores are read within the zero-shot flow's exposure test: refused where the run
    does not compute them (`runs_them`), the same words in either flow."""
    from harness.core.errors import SettingsError

    if cfg.codec_context and not runs_them:
        problem = "is CoDeC within the exposure test of the zero_shot flow: set exposure: true, or 0"
        raise SettingsError.of("codec_context", problem)
    if cfg.scores and not runs_them:
        problem = "are computed within the exposure test of the zero_shot flow: set exposure: true"
        raise SettingsError.of("scores", problem)


def get(name: str) -> Flow:
    """The flow called `name` (its file imported on first use)."""
    if name not in NAMES:
        raise KeyError(f"no flow {name!r}: the flows are {', '.join(NAMES)}")
    return importlib.import_module(f"{__name__}.{name}").FLOW


def section_readers() -> dict[str, tuple[str, ...]]:
    """Each flow-owned section -> the flows that read it (a section no flow owns is read by every flow)."""
    out: dict[str, tuple[str, ...]] = {}
    for flow in map(get, NAMES):
        for section in flow.sections:
            out[section] = (*out.get(section, ()), flow.name)
    return out
