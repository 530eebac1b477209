"""Running a grid config: the shard's unfinished units, each written atomically as it finishes, with
a log and a manifest per run; safe to kill and rerun."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from harness import results
from harness.core.engine import threads as thread_count
from harness.core.plumbing.errors import SettingsError, UserError, read_json_object
from harness.core.plumbing.provenance import library_versions
from harness.core.plumbing.run_log import RunLog, output_to
from harness.grid.configuration import plan, resolve
from harness.grid.configuration.config import GridConfig
from harness.grid.configuration.plan import RunPlan
from harness.grid.execution import folder_checks
from harness.grid.unit import flow, unit_record
from harness.grid.unit.unit_plan import UnitKey, UnitPlan
from harness.grid.unit.unit_record import UnitRecord
from harness.results import lock
from harness.tasks.lm_eval_spec import folder_name

Executor = Callable[[list[UnitPlan], bool], Iterator[UnitRecord]]
log = logging.getLogger("tapt_bench.grid")


def task_dir(cfg: GridConfig, slug: str) -> Path:
    return results.task_dir(resolve.folder(cfg), folder_name(slug))


def todo(cfg: GridConfig, shard: tuple[int, int]) -> list[UnitKey]:
    """The shard's units that have no finished result yet."""
    return [key for key in plan.shard_keys(cfg, shard) if not results.is_done(task_dir(cfg, key.slug), key.k)]


def start_log(folder: Path, shard: tuple[int, int]) -> logging.FileHandler:
    """A log file per run under <model dir>/logs, with what this run does and how long each unit took."""
    path = results.new_log_path(folder, shard)
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = RunLog(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    return handler


def earlier_runs(path: Path) -> list[dict]:
    """The runs before this one into the shard, from the manifest this run replaces (a resumed run keeps
    their code, start, seconds and finished units); read as check_plan_kept reads manifests."""
    if not path.is_file():
        return []
    old = read_json_object(path, str(path), "delete it; the next run writes it again")
    last = {key: old.get(key) for key in ("code", "started", "seconds", "finished_units")}
    return [*old.get("earlier_runs", []), last]


def write_manifest(
    planned: RunPlan, shard: tuple[int, int], started: float, finished: list, earlier: list[dict]
) -> None:
    cfg = planned.config
    manifest = {
        "config": cfg.keys(),
        "settings_hash": planned.settings_hash,
        "shard": list(shard),
        "versions": library_versions(),
        "seed": cfg.sample.seed,
        "code": planned.code,
        "config_hash": planned.config_hash,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
        "seconds": time.time() - started,
        "finished_units": finished,
        "earlier_runs": earlier,
    }
    results.write_json(results.manifest_path(planned.folder, shard), manifest)


def write_unit(planned: RunPlan, record: UnitRecord, shard: tuple[int, int] = (0, 1)) -> Path:
    """Record the unit atomically (a rewrite of the same unit replaces it) and rebuild its task's tables;
    only where the task's finished units still hold this run's settings (another shard's run, say, with
    other settings wrote none since this one started)."""
    slug, k = record.key
    tdir = planned.task_dir(slug)
    others = {k for _, k in planned_other_shards(planned, tdir, shard)}
    mixed = sorted(
        i
        for i, u in results.finished(tdir).items()
        if not results.same_settings(u.get("settings"), planned.recorded) and i not in others
    )
    if mixed:
        raise SettingsError(
            f"{tdir}: unit(s) {mixed} were written with other settings while this run ran (another run "
            f"into this --out); {slug} subsample {k} is not written. Run each config into its own --out"
        )
    wrong = unit_record.problem(record, planned.config.grid.conditions)
    if wrong:
        raise UserError(
            f"flow {planned.config.grid.flow}: {slug} subsample {k}: {wrong}; nothing of it is written. Fix "
            "the flow's compute"
        )
    results.write_unit(tdir, k, record.accs, record.probs, record.record)
    results.rebuild(tdir, planned.recorded)
    return tdir


def planned_other_shards(planned: RunPlan, tdir: Path, shard: tuple[int, int]) -> list[tuple[Path, int]]:
    """The units of `tdir` that the run's other shards compute (where an --overwrite kept their old ones)."""
    if shard[1] == 1:
        return []
    mine = {(planned.task_dir(key.slug), key.k) for key in plan.shard_keys(planned.config, shard)}
    every = {(planned.task_dir(key.slug), key.k) for key in plan.shard_keys(planned.config, (0, 1))}
    return [(d, k) for d, k in every - mine if d == tdir]


def run(
    cfg: GridConfig | RunPlan,
    shard: tuple[int, int] = (0, 1),
    keep_adapters: bool = False,
    overwrite: bool = False,
    execute: Executor | None = None,
    threads: int = 0,
    upto: int | None = None,
) -> list[Path]:
    """Run the shard's unfinished units of a config of one cell and one method (`cfg.run_configs()` gives
    them); returns the task dirs it wrote. Safe to kill and rerun. The run is planned once (harness/grid/
    plan.py): each unit reads its settings, folder and hash from its plan.

    `execute(plans, keep_adapters)` yields finished units' records in any order (default: one by one in this
    process, with `threads` torch threads (0: the free cores, see harness/core/engine/threads.py);
    execution/on_ray.py: as Ray tasks). The terminal shows one progress bar; everything else goes to
    the run's log file. `upto`: only the subsamples below it (a round of `run --until-mde`)."""
    plans = (cfg,) if isinstance(cfg, RunPlan) else plan.run_plans(cfg)  # a RunPlan: checked already
    if len(plans) != 1:
        raise SettingsError(
            f"run takes one cell and one method, and this config has {len(plans)}: run each of its "
            "run_configs()"
        )
    with lock.held(plans[0].folder, shard, alone=overwrite):  # before any check or deletion
        return locked_run(plans[0], shard, keep_adapters, overwrite, execute, threads, upto)


def locked_run(
    planned: RunPlan,
    shard: tuple[int, int],
    keep_adapters: bool,
    overwrite: bool,
    execute: Executor | None,
    threads: int,
    upto: int | None = None,
) -> list[Path]:
    from tqdm import tqdm

    cfg = planned.config
    folder_checks.check_settings(planned, overwrite, shard)  # before anything is written
    earlier = earlier_runs(results.manifest_path(planned.folder, shard))  # an unreadable one: before, too
    planned_units = planned.units(shard)
    for tdir in {p.folder for p in planned_units}:
        if results.stale_tables(tdir):  # units copied in from another machine, or a stop between the two
            results.rebuild(tdir)
    in_shard = [p for p in planned_units if upto is None or p.key.k < upto]
    pending = planned.pooled([p for p in in_shard if not results.is_done(p.folder, p.key.k)])
    handler = start_log(planned.folder, shard)
    started, finished, touched, stages = time.time(), [], [], []
    log.info(
        "shard %s/%s: %d units to run of %d; base %s", *shard, len(pending), len(in_shard), cfg.model.base
    )
    write_manifest(planned, shard, started, finished, earlier)
    execute = execute or functools.partial(in_process, threads=threads)
    try:
        with (
            output_to(Path(handler.baseFilename)) as terminal,
            tqdm(
                total=len(pending),
                desc=f"m={cfg.sample.m} n={cfg.sample.n} units",
                unit="unit",
                file=terminal,
            ) as bar,
        ):
            for record in execute(pending, keep_adapters):
                touched.append(write_unit(planned, record, shard))
                accs = " ".join(f"{c} {record.accs[c]:.3f}" for c in cfg.grid.conditions)
                log.info(
                    "%s subsample %d: %s (%.0f s)", *record.key, accs, sum(record.record["seconds"].values())
                )
                finished.append(list(record.key))
                stages.append(record.record["seconds"])
                write_manifest(planned, shard, started, finished, earlier)
                bar.update()
    finally:
        log.removeHandler(handler)
        handler.close()
    if stages:
        line = stage_line(stages, time.time() - started)
        print(line)
        log.info(line)
    print(f"log: {handler.baseFilename}")
    return sorted(set(touched))


def stage_line(unit_seconds: list[dict[str, float]], wall: float) -> str:
    """Where a run's time went: each stage's seconds summed over its units (`train_extra` under train),
    and the rest of the wall time (loading the base, drawing the data, writing)."""
    stages: dict[str, dict[str, float]] = {}
    for seconds in unit_seconds:
        for name, s in seconds.items():
            stage, _, cond = name.partition("_")
            stages.setdefault(stage, {}).setdefault(cond, 0.0)
            stages[stage][cond] += s
    parts = []
    for stage, by_cond in stages.items():
        detail = ", ".join(f"{c} {s:.0f}" for c, s in by_cond.items() if c)
        parts.append(f"{stage} {sum(by_cond.values()):.0f}" + (f" ({detail})" if detail else ""))
    rest = wall - sum(sum(c.values()) for c in stages.values())
    if rest >= 0:
        parts.append(f"other {rest:.0f} (loading the base, data, writing)")
    else:  # parallel units (workers, Ray): their stages overlap in time
        parts.append("units ran side by side, so their stages add up to more than the wall time")
    return f"seconds by stage over {len(unit_seconds)} unit(s), {wall:.0f} s in all: " + " · ".join(parts)


def in_process(pending: list[UnitPlan], keep_adapters: bool, threads: int = 0) -> Iterator[UnitRecord]:
    """The units one after another in this process, each with the torch threads `threads.use` gives."""
    for unit in pending:
        log.info("%s subsample %d: start with %d torch thread(s)", *unit.key, thread_count.use(threads))
        yield flow.compute(unit, keep_adapters)
