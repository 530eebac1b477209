"""What a run checks once, before anything is written, beyond a config's own values: the out folder, the
task overrides, each method and each cell (a config checks its keys, loading at most its plug-in flow;
these load methods and probe the disk)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from contamination.exposure import check_sizes
from harness import results
from harness.core.design import conditions
from harness.core.plumbing.errors import SettingsError, UserError
from harness.core.plumbing.settings import NEVER, did_you_mean, field_names
from harness.grid.configuration import resolve
from harness.grid.configuration.config import GridConfig, as_set, config_path, load_config
from harness.grid.unit.flow import FLOWS, default_method
from harness.grid.unit.flow import get as get_flow
from harness.scoring.classifier import STUDY_TASK_OVERRIDES
from harness.tasks.lm_eval_spec import LmEvalSpec, chat_problem
from harness.tasks.protocol import find_spec
from tapt import methods


def load_run(path: str | Path, overrides: dict | None = None) -> GridConfig:
    """A config read and checked (config.load_config), then the run's own checks, once: an error named
    as the user set its key (the flag, else the config file's key)."""
    cfg = load_config(path, overrides)
    try:
        check_run(cfg)
    except SettingsError as err:
        raise as_set(err, config_path(path), overrides or {}) from None
    return cfg


def check_run(cfg: GridConfig) -> list[GridConfig]:
    """Everything a run checks once, before anything is written: the out folder, the task overrides, each
    method (its flow, its settings, the stream), the plug-in scores and each cell. The config of each cell
    and method, checked."""
    problem = results.folder_problem(cfg.grid.out)
    if problem:
        raise SettingsError.of("out", problem)
    check_task_overrides(cfg)
    cells = cfg.run_configs()  # per cell, per method
    used = check_methods(cfg, cells[: len(cells) // max(len(cfg.grid.cells), 1)])  # the first cell's
    unused = sorted(set(cfg.grid.method_settings) - used)
    if unused:
        problem = f"names {unused}, which this run does not use (methods: {sorted(used)})"
        raise SettingsError.of("method_settings", problem)
    cfg.loaded_scores()  # each one importable, a Score, its settings a mapping
    if cfg.sample.prompt_format != "plain":  # an lm-eval task renders its own prompt
        for slug in cfg.slugs:
            spec = find_spec(slug, cfg.sample.include_path)
            if isinstance(spec, LmEvalSpec):
                raise SettingsError.of("prompt_format", chat_problem(spec.task_name))
    for cell in cells:  # checks the form of each cell
        check_cell(cfg, cell.sample.n)
    return cells


def check_task_overrides(cfg: GridConfig) -> None:
    """Each task's overrides: keys a task may set, and valid values. What a unit never records cannot
    differ between its tasks (the model's folder, the plan, the run's shape), and neither can what
    decides the draw or the base (GridConfig.merged reads every section's RECORD)."""
    fixed = {k for k, rule in cfg.merged("RECORD").items() if rule == NEVER}
    fixed |= {"flow", "task_overrides", "m", "n", "seed", "base"}
    allowed = set(cfg.owners()) | method_keys(cfg)
    for slug, values in cfg.grid.task_overrides.items():
        keys = set(values) if isinstance(values, dict) else {f"{values!r} (not a mapping)"}
        bad = sorted(keys - allowed | keys & fixed)
        if bad:
            settable = sorted(allowed - fixed)
            problem = (
                f"{slug}: {bad} cannot be set per task{did_you_mean(bad, settable)}"
                + f"; per-task keys are the training settings this run reads ({', '.join(settable[:8])}, ...)"
            )
            raise SettingsError.of("task_overrides", problem)
        check_task_override(cfg, slug)


def check_methods(cfg: GridConfig, configs: list[GridConfig]) -> set[str]:
    """Each method and dose of one cell's configs: named once, serving the run's flow, its settings
    valid (per task too), able to carry an adapter where the stream carries one; the methods' names."""
    key = "methods" if cfg.grid.methods else "method"
    used, seen = set(), set()
    for config in configs:
        method = config.adaptation()
        if (method.name, config.dose()) in seen:
            problem = f"names {method.name} twice ({cfg.grid.methods}); name each method once"
            raise SettingsError.of(key, problem)
        unknown = [f for f in method.flows if f not in FLOWS]
        if unknown:
            problem = f"{method.name} ({method.source}) names flows {unknown}; the flows are {list(FLOWS)}"
            raise SettingsError.of(key, problem)
        if get_flow(cfg.grid.flow).name not in method.flows:  # a plug-in flow is named by its file
            problem = f"{method.name} serves the flow(s) {list(method.flows)}, and flow is {cfg.grid.flow!r}"
            raise SettingsError.of(key, problem)
        for slug in [None, *cfg.grid.task_overrides]:  # checks them, and each task's values of its keys
            resolve.method_settings(config, slug, method)
        if method.check_task is not None:
            for slug in config.slugs:
                why = method.check_task(
                    resolve.method_settings(config, slug, method), find_spec(slug, cfg.sample.include_path)
                )
                if why:
                    raise SettingsError.of("method_settings", f"{method.name}, task {slug}: {why}")
        carry = conditions.STREAM in cfg.grid.conditions and cfg.grid.stream_mode == "carry"
        if carry and not method.carries:
            problem = (
                f"is carry, and {method.name} cannot carry an adapter on from chunk to chunk (its "
                "Method has carries False): set stream_mode: restart"
            )
            raise SettingsError.of("stream_mode", problem)
        used.add(method.name)
        seen.add((method.name, config.dose()))
    return used


def check_cell(cfg: GridConfig, n: int) -> None:
    """A cell of test size n: room for CoDeC's context, the stream's chunks and the exposure test."""
    if cfg.grid.codec_context > n - 1:
        problem = (
            f"is {cfg.grid.codec_context}, and a document of a cell with n {n} has {n - 1} "
            f"others in its split to stand before it; set at most {n - 1} (the authors use 1)"
        )
        raise SettingsError.of("codec_context", problem)
    if conditions.STREAM in cfg.grid.conditions:
        check_stream(cfg, n)
    if cfg.grid.exposure:
        try:
            check_sizes(n, n)
        except UserError as err:
            raise SettingsError(f"exposure: {err}", "exposure", str(err)) from None


def check_task_override(cfg: GridConfig, slug: str) -> None:
    """A task the run holds (the study's default also names tasks a run may leave out), and values
    that are valid settings, named by their path, before anything is written."""
    import difflib

    if slug not in cfg.slugs and slug not in STUDY_TASK_OVERRIDES:
        near = difflib.get_close_matches(slug, cfg.slugs, n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        problem = f"names {slug!r}, which is not a task of this run ({hint}tasks: {cfg.slugs})"
        raise SettingsError.of("task_overrides", problem)
    owners, values = cfg.owners(), cfg.grid.task_overrides[slug]
    for name, section in cfg.sections().items():  # each section with the task's values, checked
        changed = {k: v for k, v in values.items() if owners.get(k) == name}
        if not changed:
            continue
        try:
            type(section)(**{**dataclasses.asdict(section), **changed})
        except SettingsError as err:
            problem = f"{slug}.{err.key}: {err.problem}" if err.key else f"{slug}: {err}"
            raise SettingsError.of("task_overrides", problem) from None


def method_keys(cfg: GridConfig) -> set[str]:
    """The keys a task may override beyond the grid's: the settings of the run's methods and of each
    flow's default method (the study's per-task keys name raw-text TAPT's)."""
    names = [default_method(name) for name in FLOWS] + cfg.grid.methods + [cfg.grid.method or ""]
    return {k for name in names if name for k in field_names(methods.find(name).settings)}


def check_stream(cfg: GridConfig, n: int) -> None:
    """At least two chunks of test (the first is the base's), none empty."""
    if cfg.grid.stream_mode == "carry" and cfg.grid.stream_chunk_size >= n:
        problem = f"is {cfg.grid.stream_chunk_size}, and a cell has {n} test documents: at most {n - 1}"
        raise SettingsError.of("stream_chunk_size", problem)
    if cfg.grid.stream_mode == "restart" and cfg.grid.stream_chunks > n:
        problem = f"is {cfg.grid.stream_chunks}, more than a cell's {n} test documents; lower it"
        raise SettingsError.of("stream_chunks", problem)
