"""One (task, subsample) unit of the grid, computed by its flow (harness/grid/flows/): the task and its
subsample are drawn once, each stage gets its own settings and the objects it needs."""

from __future__ import annotations

import logging

import pandas as pd

from harness.core.errors import UserError
from harness.grid import flows
from harness.grid.plan import Planned
from harness.grid.unit_record import Unit

log = logging.getLogger("tapt_bench.grid")


def compute_unit(unit: Planned, keep_adapters: bool = False) -> Unit:
    """Compute one unit of the plan by its flow; nothing is written but kept adapters."""
    return flows.get(unit.config.flow).unit(unit, keep_adapters)


def null_model(unit: Planned, base_scored: pd.DataFrame):
    """The unit's method adapted on a third draw of the pool (the flow's null model), scored as every
    condition is."""
    flow = flows.get(unit.config.flow)
    if flow.null_model is None:
        raise UserError(f"the {flow.name} flow has no null model")
    return flow.null_model(unit, base_scored)
