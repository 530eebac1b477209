"""One unit of the grid as the process that computes it receives it: `UnitKey` names the unit (a task and
a subsample), `UnitPlan` holds every value it computes from, resolved once by the run's plan
(grid/configuration/plan.py) and sent as it is to a worker process or a Ray task. It pickles: plug-ins (the
method, plug-in scores) travel by name and are found where the unit runs; an lm-eval task travels by name
too (harness/tasks/lm_eval_spec.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from contamination.exposure_run import ExposureSettings
from harness.core.design import seeds
from harness.core.engine.models import FormSettings, ModelSettings
from harness.core.plumbing.settings import Settings
from harness.grid.grid_settings import GridSettings
from harness.tasks.protocol import Spec, subsample_docs
from harness.tasks.subsample import SampleSettings
from tapt import methods

SHARED_SECTIONS = {"form": FormSettings}  # a shared section a flow may read (Flow.reads), by name


class UnitKey(NamedTuple):
    """A unit's name: its task's slug and its subsample's index."""

    slug: str
    k: int


@dataclass(frozen=True)
class UnitPlan:
    """What one unit computes from: its task, its subsample, the config's sections with the task's
    overrides applied, the method (by name) with its resolved settings, where its record goes, and the
    record's settings, hashes and code version."""

    key: UnitKey
    spec: Spec
    method: str  # as the config or its flow names it: built-in, entry point, `module:attr`, `file.py:attr`
    method_settings: Settings  # resolved once by the run's plan: the base's form, the task's overrides
    grid: GridSettings
    sample: SampleSettings
    model: ModelSettings
    exposure_test: ExposureSettings
    sections: dict[str, dict]  # the flow's own sections' values (its `reads` and `sections`), by name
    folder: Path  # the task's results folder, <out>/m<m>/n<n>/<tag>/<task>
    tag: str  # the model folder's name
    recorded: dict  # the settings every unit of the run records (configuration/resolve.py: recorded)
    settings_hash: str
    base_hash: str  # of the settings the base's scores depend on (methods side by side share them)
    code: dict  # the product code's commit and the config's hash (harness/core/design/study_plan.py)
    weights: str | None = None  # the base's weight files by content (harness/grid/unit/fingerprints.py)
    pool: tuple[str, float] | None = None  # the task's pool: its hash and majority share, read once a run

    def __getstate__(self) -> dict:
        """Sent to a worker process or a Ray task: the method's settings as their values, as a plug-in's
        class cannot be pickled by reference (its file is loaded by path); `__setstate__` builds them
        again, once, from the method found by name where the unit runs."""
        return self.__dict__ | {"method_settings": dataclasses.asdict(self.method_settings)}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        values = state["method_settings"]
        object.__setattr__(self, "method_settings", methods.find(self.method).settings(**values))

    def section(self, name: str) -> Settings:
        """One of the flow's own sections (the zero-shot flow's `form`, the classifier's `head`), an
        instance of the class the flow declares for it (found by the flow's name where the unit runs, as
        the method is: a plug-in's class travels by name)."""
        from harness.grid.unit import flow

        if name not in self.sections:
            raise KeyError(
                f"the unit's flow {self.grid.flow!r} has no section {name!r} ({list(self.sections)})"
            )
        served = flow.get(self.grid.flow)
        cls = served.sections[name][0] if name in served.sections else SHARED_SECTIONS[name]
        return cls(**self.sections[name])

    @property
    def seed(self) -> int:
        """The unit's seed: the run's. Every stage takes its own stream of it from `stream`."""
        return self.sample.seed

    def stream(self, name: str) -> int:
        """The seed of one of the unit's streams that torch and transformers read (`adapt`, `classifier`,
        `exposure`), by the one rule of harness.core.design.seeds."""
        return seeds.derive(self.seed, self.key.k, name)

    def adaptation(self) -> methods.Method:
        """The unit's method, found by its name where the unit runs."""
        return methods.find(self.method)

    def docs(self) -> dict[str, pd.DataFrame]:
        """The unit's documents: train, extra, test and the pool's third draw."""
        return subsample_docs(self.spec, self.sample, self.key.k)
