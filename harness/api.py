"""The public surface for plug-ins: everything a method file, a detector or a task hook needs, from one
module that internal renames do not move (as lm-eval's plug-ins import from `lm_eval.api`).

    from harness.api import Adapted, Inputs, Method, Settings, answered, option
    from harness.api import TEXT, Detector, register          # a detector: register(Detector(..., name=...))
    from harness.api import Statistic, register               # a summary statistic: register(Statistic(...))
    from harness.api import Flow, UnitPlan, record_of          # a flow: FLOW = Flow(...)

`register` is the one verb for every kind of plug-in (KINDS, in harness.core.plumbing.plugin_kinds: a
method, a flow, a detector, a statistic, a score): it adds the item under its name where it is defined
and returns it. An installed plug-in is an entry point of its kind's group that names the value
(`module:NAME`).
"""

from contamination import detectors
from contamination.detectors import DETECTORS, LABELS, SCORES, TEXT, Detector
from contamination.doc_scores import Score, ScoreInputs
from harness.core.plumbing.errors import SettingsError, UserError
from harness.core.plumbing.plugin_kinds import KINDS
from harness.core.plumbing.plugins import REGISTRIES, PluginError
from harness.core.plumbing.recipe import recipe_table
from harness.core.plumbing.settings import Settings, option
from harness.grid.unit.flow import FLOWS, Flow
from harness.grid.unit.unit_plan import UnitPlan
from harness.grid.unit.unit_record import UnitRecord, record_of
from harness.stats.summary.statistics import STATISTICS, Statistic
from harness.tasks.protocol import Spec, answered
from tapt.methods import LEARNED_FROM, METHODS, VOTES, Adapted, Inputs, Method


def register(item, detector: Detector | None = None):
    """Add a plug-in where it is defined, of any kind of harness.core.plumbing.plugin_kinds.KINDS (a
    Method, a Flow, a Detector named by its `name`, a Statistic, a Score); returns it.
    `register("name", Detector(...))` names a detector as its first spelling did. A name taken by another
    item of the kind is refused."""
    if isinstance(item, str):
        return detectors.register(item, detector)
    for kind in KINDS:
        registry = REGISTRIES[kind.name]
        if isinstance(item, registry.of):
            return registry.register(item)
    *rest, last = (k.type.rpartition(":")[2] for k in KINDS)
    raise PluginError(f"register takes a {', '.join(rest)} or {last}; {item!r} is a {type(item).__name__}")


register_statistic = register  # the statistic's first spelling

__all__ = [
    "DETECTORS",
    "FLOWS",
    "LABELS",
    "LEARNED_FROM",
    "METHODS",
    "SCORES",
    "STATISTICS",
    "TEXT",
    "VOTES",
    "Adapted",
    "Detector",
    "Flow",
    "Inputs",
    "Method",
    "Settings",
    "SettingsError",
    "Score",
    "ScoreInputs",
    "Spec",
    "Statistic",
    "UnitPlan",
    "UnitRecord",
    "UserError",
    "answered",
    "option",
    "recipe_table",
    "record_of",
    "register",
    "register_statistic",
]
