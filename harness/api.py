"""The public surface for plug-ins: everything a method file, a detector or a task hook needs, from one
module that internal renames do not move (as lm-eval's plug-ins import from `lm_eval.api`).

    from harness.api import Adapted, Inputs, Method, Settings, answered, option
    from harness.api import TEXT, Detector, register          # a detector: register("name", Detector(...))
    from harness.api import Statistic, register_statistic     # a summary statistic
    from harness.api import Flow, UnitPlan, record_of          # a flow: FLOW = Flow(...)
"""

from contamination.detectors import DETECTORS, LABELS, TEXT, Detector, register
from contamination.doc_scores import Score, ScoreInputs
from harness.core.errors import SettingsError, UserError
from harness.core.recipe import recipe_table
from harness.core.settings import Settings, option
from harness.grid.flow import Flow
from harness.grid.unit_plan import UnitPlan
from harness.grid.unit_record import UnitRecord, record_of
from harness.stats.statistics import Statistic
from harness.stats.statistics import register as register_statistic
from harness.tasks.protocol import Spec, answered
from tapt.methods import LEARNED_FROM, VOTES, Adapted, Inputs, Method

__all__ = [
    "DETECTORS",
    "LABELS",
    "LEARNED_FROM",
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
