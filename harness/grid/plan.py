"""A run's plan: its cells and methods, and each unit's task, subsample, settings, folder and hash, resolved
and checked once from the config. A unit reads what it needs from here, never from the config again."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.core import study_plan
from harness.core.settings import Settings, fingerprint
from harness.grid import resolve, run_checks, study_layout
from harness.grid.config import GridConfig
from harness.tasks.lm_eval_spec import folder_name
from harness.tasks.protocol import Spec, find_spec, subsample_docs
from tapt import methods


@dataclass(frozen=True)
class Cell:
    """One cell (m, n) and one method of a run, resolved: what every unit of it shares."""

    config: GridConfig  # the cell's and method's keys (their values only are read)
    method: methods.Method
    settings: Settings  # the method's, before a task's overrides
    tag: str  # the model folder's name
    folder: Path  # <out>/m<m>/n<n>/<tag>
    recorded: dict  # the settings each unit records (the tasks' own: Planned.recorded)
    settings_hash: str
    base_hash: str  # of the settings the base's scores depend on (methods side by side share them)
    scores: tuple  # (Score, settings) of each plug-in score, loaded once
    code: dict = field(default_factory=dict)  # the product code's commit (study_plan.code_version)
    config_hash: str = ""  # of the config's keys but where it reads and writes (study_plan.config_hash)
    specs: dict = field(default_factory=dict, compare=False, repr=False)  # each task's, found once

    def task_dir(self, slug: str) -> Path:
        return self.folder / folder_name(slug)

    def spec(self, slug: str) -> Spec:
        if slug not in self.specs:
            self.specs[slug] = find_spec(slug, self.config.include_path)
        return self.specs[slug]

    def unit(self, slug: str, k: int) -> Planned:
        """Subsample k of task `slug`, with the task's overrides applied to its settings."""
        task = resolve.for_task(self.config, slug) if slug in self.config.task_overrides else self.config
        settings = resolve.method_settings(task) if task is not self.config else self.settings
        return Planned(self, slug, k, task, settings, self.task_dir(slug))

    def units(self, shard: tuple[int, int] = (0, 1)) -> tuple[Planned, ...]:
        return tuple(self.unit(slug, k) for slug, k in shard_units(self.config, shard))


def shard_units(cfg: GridConfig, shard: tuple[int, int] = (0, 1)) -> list[tuple[str, int]]:
    """The (task, subsample) units of this shard: every N-th unit of a fixed order, from the i-th."""
    i, count = shard
    everything = [(slug, k) for slug in cfg.slugs for k in range(cfg.subsamples)]
    return everything[i::count]


@dataclass(frozen=True)
class Planned:
    """One unit of a run: its task and subsample, its config (the task's overrides applied), the method's
    resolved settings and its task folder; it records its cell's settings and hash (`task_overrides`
    among them)."""

    cell: Cell
    slug: str
    k: int
    config: GridConfig
    settings: Settings
    folder: Path

    @property
    def recorded(self) -> dict:
        return self.cell.recorded

    def inputs(self) -> tuple[Spec, dict]:
        """The unit's task and its documents (train, extra, test and the pool's third draw)."""
        spec = self.cell.spec(self.slug)
        return spec, subsample_docs(spec, self.config.sample, self.k)

    @property
    def settings_hash(self) -> str:
        return self.cell.settings_hash


def cell(cfg: GridConfig) -> Cell:
    """The plan of a config of one cell and one method (as `cells` gives), resolved once."""
    recorded, folder = resolve.recorded(cfg), resolve.folder(cfg)
    return Cell(
        config=cfg,
        method=cfg.adaptation(),
        settings=resolve.method_settings(cfg),
        tag=folder.name,
        folder=folder,
        recorded=recorded,
        settings_hash=fingerprint(recorded),
        base_hash=fingerprint(study_layout.base_record(recorded)),
        scores=tuple(cfg.loaded_scores()),
        code=study_plan.code_version(),
        config_hash=study_plan.config_hash(cfg.keys()),
    )


def cells(cfg: GridConfig) -> tuple[Cell, ...]:
    """The run's cells and methods, each checked (run_checks.check_run) and resolved, once."""
    return tuple(cell(c) for c in run_checks.check_run(cfg))
