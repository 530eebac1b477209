"""What a config's settings come to for a run: the method's settings (per task), a task's config, the
results folder's name, and the settings each unit records with their hash. The plan (harness/grid/
plan.py) and the run's checks read a config through these; a config itself only holds checked values."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from contamination import codec
from harness import results
from harness.core.design import conditions
from harness.core.plumbing.errors import SettingsError
from harness.core.plumbing.plugins import source_sha256
from harness.core.plumbing.sections import recorded as section_record
from harness.core.plumbing.settings import Settings, field_names, fingerprint
from harness.grid.configuration import study_layout
from harness.grid.configuration.config import GridConfig
from harness.grid.unit import flow
from harness.scoring.classifier import FIRST_TASK_OVERRIDES
from tapt import methods

HIDDEN = tuple(k for k in study_layout.FORM if k != "bf16")  # the base's form: top-level keys only


Found = (
    methods.Method | None
)  # the config's method where the caller found it already (a plan), else found here


def method_values(cfg: GridConfig, slug: str | None = None, method: Found = None) -> dict:
    """The method's section of method_settings, with a task's overrides of its own keys."""
    method = method or cfg.adaptation()
    values = cfg.grid.method_settings.get(method.name) or {}
    if not isinstance(values, dict):
        raise SettingsError.of("method_settings", f"{method.name}: {values!r} is not a mapping")
    return values | study_layout.task_keys(method.settings, cfg.grid.task_overrides.get(slug, {}))


def method_settings(cfg: GridConfig, slug: str | None = None, method: Found = None) -> Settings:
    """The method's settings: its section of method_settings (with the task's overrides of its keys), on
    the base's form where its settings declare it (quantize, fallback_lora, bf16: top-level keys)."""
    method = method or cfg.adaptation()
    values = method_values(cfg, slug, method)
    form = [k for k in values if k in HIDDEN]
    if form:
        problem = f"{method.name}: {form} set the base's form for every method; set them at the top level"
        raise SettingsError.of("method_settings", problem)
    own = field_names(method.settings)
    base = {k: v for k, v in dataclasses.asdict(cfg.form).items() if k in own}
    try:
        return method.configured(base | values, method.name, HIDDEN)
    except SettingsError as err:
        if slug and err.key in study_layout.task_keys(method.settings, cfg.grid.task_overrides.get(slug, {})):
            raise SettingsError.of("task_overrides", f"{slug}.{err.key}: {err.problem}") from None
        dosed = {s for swept in cfg.grid.doses.values() for s in swept}
        if err.key in dosed:  # a dose's value: the key the user wrote it under
            raise SettingsError.of("doses", f"{method.name}: {err.key}: {err.problem}") from None
        raise SettingsError(f"method_settings {err}", "method_settings", str(err)) from None


def for_task(cfg: GridConfig, slug: str, method: Found = None) -> GridConfig:
    """The config with the task's overrides applied (checked like any settings): the grid's keys as keys,
    the method's own under its method_settings."""
    values, owners, method = cfg.grid.task_overrides.get(slug, {}), cfg.owners(), method or cfg.adaptation()
    changes = {k: v for k, v in values.items() if k in owners}
    if study_layout.task_keys(method.settings, values):
        changes["method_settings"] = {
            **cfg.grid.method_settings,
            method.name: method_values(cfg, slug, method),
        }
    return cfg.replace(**changes) if changes else cfg


def tag(cfg: GridConfig, method: Found = None) -> str:
    """The results folder of the model: the base's name, with `+method` for another method than the
    flow's default (harness.grid.configuration.study_layout)."""
    name = cfg.grid.model_tag or Path(cfg.model.base.rstrip("/")).name
    dose = cfg.dose()
    method = method or cfg.adaptation()
    return study_layout.tag(cfg.grid.flow, method.name, name) + (f"@{dose}" if dose else "")


def folder(cfg: GridConfig, method: Found = None) -> Path:
    """<out>/m<m>/n<n>/<tag>: the model folder of a config of one cell and one method."""
    return results.model_dir(cfg.grid.out, cfg.sample.m, cfg.sample.n, tag(cfg, method))


def recorded(cfg: GridConfig, method: Found = None, settings: Settings | None = None) -> dict:
    """The settings that can change a unit's numbers, by the one rule of `sections.recorded` over the
    sections its flow uses; recorded with every unit (the method's `settings` where the plan resolved
    them already)."""
    out, readers, method = {}, flow.section_readers(), method or cfg.adaptation()
    served = flow.get(cfg.grid.flow).name  # a plug-in flow is named by its file in the config
    for name, section in cfg.sections().items():
        if served in readers.get(name, (served,)):
            out |= section_record(section, cfg.grid.parts())
    if "task_overrides" in out and read_by_tasks(cfg, out["task_overrides"], method) == read_by_tasks(
        cfg, FIRST_TASK_OVERRIDES, method
    ):
        out["task_overrides"] = FIRST_TASK_OVERRIDES  # the same units: `{}` in a zero_shot run, say
    if conditions.LEAK in cfg.grid.conditions and (served == "classifier" or cfg.grid.leak_strength > 1):
        # since 2026-12-07 the leak reads test's documents at test's steps, its strength the copies of each
        # answer (the classifier's masked on every read); before, its documents were copied: other units
        out["leak_plant"] = "answers"
    if cfg.grid.codec_context:  # the tokens CoDeC scores (the authors' span): units of another differ
        out["codec_span"] = [codec.SKIP_FIRST, -codec.DROP_LAST]
        out["codec_block"] = cfg.grid.codec_block  # documents that share a context
    if cfg.grid.scores and cfg.grid.exposure:  # a plug-in score's code, as its settings are recorded
        out["scores_code"] = {target: source_sha256(target) for target in cfg.grid.scores}
    settings = settings or method_settings(cfg, method=method)
    record = study_layout.record(cfg.grid.flow, method.name, settings, out)
    code, flow_code = plugin_code(method), flow_plugin_code(cfg.grid.flow)
    return record | ({"method_code": code} if code else {}) | ({"flow_code": flow_code} if flow_code else {})


def flow_plugin_code(name: str) -> str | None:
    """A plug-in flow's file, by its sha256, as a plug-in method's is (plugin_code): a unit of an edited
    flow is a unit of other settings. None for a built-in flow (the product commit covers it)."""
    if name in flow.builtin():
        return None
    found = flow.get(name)
    if found.name in flow.builtin():
        return None
    target = name
    if ":" not in name and not name.endswith(".py"):  # an installed entry point: its module:attr
        from importlib.metadata import entry_points

        target = next((e.value for e in entry_points(group=flow.FLOWS.group) if e.name == name), name)
    return source_sha256(target)


def plugin_code(method: methods.Method) -> str | None:
    """A plug-in method's file, by its sha256 (a built-in's code is the product commit's): a unit of an
    edited plug-in is a unit of other settings, never pooled with the old one's."""
    source = method.source
    if source == "built in":
        return None
    if source.startswith("entry point"):  # 'entry point NAME (module:attr)'
        source = source[source.index("(") + 1 : -1]
    return source_sha256(source)


def applying(cfg: GridConfig, overrides: dict, method: methods.Method) -> dict:
    """The per-task keys this run reads (a zero_shot run reads no classifier key), per task."""
    readers, served = flow.section_readers(), flow.get(cfg.grid.flow).name
    used = {k for k, name in cfg.owners().items() if served in readers.get(name, (served,))}
    used |= set(field_names(method.settings))
    kept = {slug: {k: v for k, v in values.items() if k in used} for slug, values in overrides.items()}
    return {slug: values for slug, values in kept.items() if values}


def read_by_tasks(cfg: GridConfig, overrides: dict, method: methods.Method) -> dict:
    """The per-task keys this run's own tasks read (applying, for the run's tasks alone)."""
    tasks = set(cfg.slugs)
    return {slug: values for slug, values in applying(cfg, overrides, method).items() if slug in tasks}


def settings_hash(cfg: GridConfig) -> str:
    return fingerprint(recorded(cfg))


def base_settings(cfg: GridConfig) -> dict:
    """The settings that can change the base's own scores in a unit: the recorded settings without the
    method's (methods side by side with equal base settings share the base's scores)."""
    return study_layout.base_record(recorded(cfg))
