"""A run's plan: its cells and methods, and each unit's task, subsample, settings, folder and hash, resolved
and checked once from the config. A unit reads what it needs from here, never from the config again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness import results
from harness.core.settings import Settings, fingerprint
from harness.grid import run_checks
from harness.grid.config import GridConfig
from harness.tasks.lm_eval_spec import folder_name
from harness.tasks.protocol import Spec, find_spec, subsample_docs
from tapt import methods


@dataclass(frozen=True)
class Cell:
    """One cell (m, n) and one method of a run, resolved: what every unit of it shares."""

    config: GridConfig  # the cell's and method's keys (their values only are read)
    method: methods.Method
    tag: str  # the model folder's name
    folder: Path  # <out>/m<m>/n<n>/<tag>
    recorded: dict  # the settings each unit records (the tasks' own: Planned.recorded)
    settings_hash: str
    base_hash: str  # of the settings the base's scores depend on (methods side by side share them)
    scores: tuple  # (Score, settings) of each plug-in score, loaded once

    def task_dir(self, slug: str) -> Path:
        return self.folder / folder_name(slug)

    def unit(self, slug: str, k: int) -> Planned:
        """Subsample k of task `slug`, with the task's overrides applied to its settings."""
        task = self.config.for_task(slug) if slug in self.config.task_overrides else self.config
        return Planned(self, slug, k, task, task.settings_of(self.method), self.task_dir(slug))

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
        spec = find_spec(self.slug, self.config.include_path)
        return spec, subsample_docs(spec, self.config.sample, self.k)

    @property
    def settings_hash(self) -> str:
        return self.cell.settings_hash


def cell(cfg: GridConfig) -> Cell:
    """The plan of a config of one cell and one method (as `cells` gives), resolved once."""
    recorded = cfg.result_settings()
    return Cell(
        config=cfg,
        method=cfg.adaptation(),
        tag=cfg.tag,
        folder=results.model_dir(cfg.out, cfg.m, cfg.n, cfg.tag),
        recorded=recorded,
        settings_hash=fingerprint(recorded),
        base_hash=fingerprint(cfg.base_settings()),
        scores=tuple(cfg.loaded_scores()),
    )


def cells(cfg: GridConfig) -> tuple[Cell, ...]:
    """The run's cells and methods, each checked (run_checks.check_run) and resolved, once."""
    return tuple(cell(c) for c in run_checks.check_run(cfg))
