"""A run's plan: one cell (m, n) and one method of a config, resolved and checked once (`RunPlan`), and each
of its units' plans (`UnitPlan`: task, subsample, settings, folder and hash). A unit reads what it needs
from its plan, never from the config again."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from harness import results
from harness.core.design import study_plan
from harness.core.plumbing.settings import Settings, fingerprint
from harness.grid.configuration import resolve, run_checks, study_layout
from harness.grid.configuration.config import GridConfig
from harness.grid.unit import fingerprints, flow
from harness.grid.unit.unit_plan import UnitKey, UnitPlan
from harness.tasks.lm_eval_spec import folder_name
from harness.tasks.protocol import Spec, find_spec
from tapt import methods


@dataclass(frozen=True)
class RunPlan:
    """One cell and one method of a config, resolved: what every unit of the run shares."""

    config: GridConfig  # the cell's and method's keys (their values only are read)
    method: methods.Method  # found once
    settings: Settings  # the method's, before a task's overrides
    tag: str  # the model folder's name
    folder: Path  # <out>/m<m>/n<n>/<tag>
    recorded: dict  # the settings each unit records
    settings_hash: str
    base_hash: str  # of the settings the base's scores depend on (methods side by side share them)
    code: dict  # the product code's commit (study_plan.code_version)
    config_hash: str  # of the config's keys but where it reads and writes (study_plan.config_hash)
    weights: str | None = None  # the base's weight files by content (fingerprints.base), hashed once a run
    tasks: dict = dataclasses.field(default_factory=dict)  # an overridden task: (its config, its settings)

    def task_dir(self, slug: str) -> Path:
        return results.task_dir(self.folder, folder_name(slug))

    def unit(self, key: UnitKey, spec: Spec | None = None) -> UnitPlan:
        """The plan of unit `key`, the task's overrides applied (its spec found, unless given)."""
        cfg = self.config
        task, settings = self.tasks.get(key.slug, (cfg, self.settings))
        return UnitPlan(
            key=key,
            spec=spec or find_spec(key.slug, cfg.sample.include_path),
            method=cfg.method_target(),  # how a worker finds it
            method_settings=settings,
            grid=task.grid,
            sample=task.sample,
            model=task.model,
            exposure_test=task.exposure_test,
            sections=flow_sections(task),
            folder=self.task_dir(key.slug),
            tag=self.tag,
            recorded=self.recorded,
            settings_hash=self.settings_hash,
            base_hash=self.base_hash,
            code=self.code | {"config_hash": self.config_hash},
            weights=self.weights,
        )

    def units(self, shard: tuple[int, int] = (0, 1)) -> tuple[UnitPlan, ...]:
        """The plans of the shard's units, each task's spec found once."""
        keys = shard_keys(self.config, shard)
        specs = {
            slug: find_spec(slug, self.config.sample.include_path)
            for slug in dict.fromkeys(k.slug for k in keys)
        }
        return tuple(self.unit(key, specs[key.slug]) for key in keys)

    def pooled(self, plans: list[UnitPlan]) -> list[UnitPlan]:
        """`plans` with their task's pool facts (its hash and majority share, which every unit of a task
        records alike), each task's pool read once: only for the units a run will compute."""
        firsts: dict[str, UnitPlan] = {}
        for p in plans:
            firsts.setdefault(p.key.slug, p)
        pools = {slug: fingerprints.pool_facts(p.spec, p.sample) for slug, p in firsts.items()}
        return [dataclasses.replace(p, pool=pools[p.key.slug]) for p in plans]


def flow_sections(cfg: GridConfig) -> dict[str, dict]:
    """The values of the config's sections its flow reads beyond the shared ones: its `reads` and its
    own (a plug-in's class travels by name: UnitPlan.section builds it where the unit runs)."""
    served = flow.get(cfg.grid.flow)
    own = cfg.sections()
    return {name: dataclasses.asdict(own[name]) for name in (*served.reads, *served.sections)}


def shard_keys(cfg: GridConfig, shard: tuple[int, int] = (0, 1)) -> list[UnitKey]:
    """The units of this shard: every N-th unit of a fixed order, from the i-th."""
    i, count = shard
    everything = [UnitKey(slug, k) for slug in cfg.slugs for k in range(cfg.grid.subsamples)]
    return everything[i::count]


def run_plan(cfg: GridConfig) -> RunPlan:
    """The plan of a config of one cell and one method (as `run_configs` gives), resolved once."""
    method = cfg.adaptation()
    settings = resolve.method_settings(cfg, method=method)
    recorded, folder = resolve.recorded(cfg, method, settings), resolve.folder(cfg, method)
    tasks = {}  # each task with overrides: its config and its method's settings, resolved once
    for slug in resolve.read_by_tasks(cfg, cfg.grid.task_overrides, method):  # keys this run reads
        task = resolve.for_task(cfg, slug, method)
        tasks[slug] = (task, resolve.method_settings(task, method=method))
    cfg.loaded_scores()  # each plug-in score loads here (its file's errors now); a unit loads it by name
    config_hash = study_plan.config_hash(cfg.keys())
    return RunPlan(
        config=cfg,
        method=method,
        settings=settings,
        tag=folder.name,
        folder=folder,
        recorded=recorded,
        settings_hash=fingerprint(recorded),
        base_hash=fingerprint(study_layout.base_record(recorded)),
        code=study_plan.code_version(),
        config_hash=config_hash,
        weights=fingerprints.base(cfg.model.base),
        tasks=tasks,
    )


def run_plans(cfg: GridConfig) -> tuple[RunPlan, ...]:
    """The plans of a config's runs, a cell and a method each, checked (run_checks.check_run) and resolved
    once."""
    return tuple(run_plan(c) for c in run_checks.check_run(cfg))
