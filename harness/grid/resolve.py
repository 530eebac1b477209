"""What a config's settings come to for a run: the method's settings (per task), a task's config, the
results folder's name, and the settings each unit records with their hash. The plan (harness/grid/
plan.py) and the run's checks read a config through these; a config itself only holds checked values."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from contamination import codec
from harness import results
from harness.core.errors import SettingsError
from harness.core.sections import recorded as section_record
from harness.core.settings import Settings, field_names, fingerprint
from harness.grid import flows, study_layout
from harness.grid.config import GridConfig
from harness.scoring.classifier import STUDY_TASK_OVERRIDES

HIDDEN = tuple(k for k in study_layout.FORM if k != "bf16")  # the base's form: top-level keys only


def method_values(cfg: GridConfig, slug: str | None = None) -> dict:
    """The method's section of method_settings, with a task's overrides of its own keys."""
    method = cfg.adaptation()
    values = cfg.method_settings.get(method.name) or {}
    if not isinstance(values, dict):
        raise SettingsError.of("method_settings", f"{method.name}: {values!r} is not a mapping")
    return values | study_layout.task_keys(method.settings, cfg.task_overrides.get(slug, {}))


def method_settings(cfg: GridConfig, slug: str | None = None) -> Settings:
    """The method's settings: its section of method_settings (with the task's overrides of its keys), on
    the base's form where its settings declare it (quantize, fallback_lora, bf16: top-level keys)."""
    method, values = cfg.adaptation(), method_values(cfg, slug)
    form = [k for k in values if k in HIDDEN]
    if form:
        problem = f"{method.name}: {form} set the base's form for every method; set them at the top level"
        raise SettingsError.of("method_settings", problem)
    own = field_names(method.settings)
    base = {k: v for k, v in dataclasses.asdict(cfg.form).items() if k in own}
    try:
        return method.configured(base | values, method.name, HIDDEN)
    except SettingsError as err:
        if slug and err.key in study_layout.task_keys(method.settings, cfg.task_overrides.get(slug, {})):
            raise SettingsError.of("task_overrides", f"{slug}.{err.key}: {err.problem}") from None
        raise SettingsError(f"method_settings {err}", "method_settings", str(err)) from None


def for_task(cfg: GridConfig, slug: str) -> GridConfig:
    """The config with the task's overrides applied (checked like any settings): the grid's keys as keys,
    the method's own under its method_settings."""
    values, owners, method = cfg.task_overrides.get(slug, {}), cfg.owners(), cfg.adaptation()
    changes = {k: v for k, v in values.items() if k in owners}
    if study_layout.task_keys(method.settings, values):
        changes["method_settings"] = {**cfg.method_settings, method.name: method_values(cfg, slug)}
    return cfg.replace(**changes)


def tag(cfg: GridConfig) -> str:
    """The results folder of the model: the base's name, with `+method` for another method than the
    flow's default (harness.grid.study_layout)."""
    name = cfg.model_tag or Path(cfg.base.rstrip("/")).name
    dose = cfg.dose()
    return study_layout.tag(cfg.flow, cfg.adaptation().name, name) + (f"@{dose}" if dose else "")


def folder(cfg: GridConfig) -> Path:
    """<out>/m<m>/n<n>/<tag>: the model folder of a config of one cell and one method."""
    return results.model_dir(cfg.out, cfg.m, cfg.n, tag(cfg))


def recorded(cfg: GridConfig) -> dict:
    """The settings that can change a unit's numbers, by the one rule of `sections.recorded` over the
    sections its flow uses; recorded with every unit."""
    out, readers = {}, flows.section_readers()
    for name, section in cfg.sections().items():
        if cfg.flow in readers.get(name, (cfg.flow,)):
            out |= section_record(section, cfg.grid.parts())
    if "task_overrides" in out and applying(cfg, out["task_overrides"]) == applying(
        cfg, STUDY_TASK_OVERRIDES
    ):
        out["task_overrides"] = STUDY_TASK_OVERRIDES  # the same units: `{}` in a zero_shot run, say
    if cfg.codec_context:  # the tokens CoDeC scores (the authors' span): units of another differ
        out["codec_span"] = [codec.SKIP_FIRST, -codec.DROP_LAST]
        out["codec_block"] = cfg.codec_block  # documents that share a context
    return study_layout.record(cfg.flow, cfg.adaptation().name, method_settings(cfg), out)


def applying(cfg: GridConfig, overrides: dict) -> dict:
    """The per-task keys this run reads (a zero_shot run reads no classifier key), per task."""
    readers = flows.section_readers()
    used = {k for k, name in cfg.owners().items() if cfg.flow in readers.get(name, (cfg.flow,))}
    used |= set(field_names(cfg.adaptation().settings))
    kept = {slug: {k: v for k, v in values.items() if k in used} for slug, values in overrides.items()}
    return {slug: values for slug, values in kept.items() if values}


def settings_hash(cfg: GridConfig) -> str:
    return fingerprint(recorded(cfg))


def base_settings(cfg: GridConfig) -> dict:
    """The settings that can change the base's own scores in a unit: the recorded settings without the
    method's (methods side by side with equal base settings share the base's scores)."""
    return study_layout.base_record(recorded(cfg))
