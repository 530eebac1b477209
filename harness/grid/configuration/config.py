"""A grid config: one experiment (base, tasks, cells, flow, training settings), read from YAML and flags
with every key checked before anything is written."""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

from contamination.exposure_run import ExposureSettings
from harness.core.design.study_plan import PlanSettings
from harness.core.engine import models
from harness.core.engine.models import SMOLLM2, ModelSettings
from harness.core.plumbing import plugins, yaml_files
from harness.core.plumbing.errors import SettingsError, UserError
from harness.core.plumbing.sections import Sections
from harness.core.plumbing.settings import against, did_you_mean, field_names, flag, from_mapping
from harness.grid.configuration import study_layout
from harness.grid.grid_settings import GridSettings
from harness.grid.unit import flow
from harness.tasks.lm_eval_spec import answering_problems
from harness.tasks.protocol import draw_rows, find_spec
from harness.tasks.spec import TASK_PREFIX, all_slugs
from harness.tasks.subsample import SampleSettings
from tapt import methods

CONFIGS_DIR = Path(__file__).resolve().parent.parent / "configs"  # the ready configs shipped with the package

SHARED = {"grid": GridSettings, "sample": SampleSettings, "model": ModelSettings}
TITLES = {"grid": "the grid", "sample": "the subsample", "model": "the base model"}
# each built-in flow's own sections (grid/unit/flow.py: a flow declares them), then the exposure test's
# and the plan's, which every flow reads
OWN = {
    name: spec
    for f in sorted(flow.builtin().values(), key=lambda f: f.name, reverse=True)
    for name, spec in f.sections.items()
}
SECTIONS = SHARED | {name: cls for name, (cls, _) in OWN.items()}
SECTIONS |= {"exposure_test": ExposureSettings, "plan": PlanSettings}
TITLES |= {name: title for name, (_, title) in OWN.items()}
TITLES |= {"exposure_test": "the exposure test", "plan": "the study's plan, fixed before it runs"}


class GridConfig(Sections):
    """One experiment: a base model, tasks, the cell(s) (m, n), the flow and its training settings
    (see harness/grid/configs/*.yaml), held as the stages' sections side by side.

    The sample and model keys are those of `tapt-bench train`, with the same meaning and defaults; every
    method's own settings are under method_settings. In a config file, the input paths (data_dir,
    include_path) resolve against the file's folder; `out` against the directory the run starts from.
    """

    SECTIONS, TITLES, CONFIG_FILE = SECTIONS, TITLES, True

    def complete(self) -> None:
        self.sample.default_chat_model(self.model.base)

    def check(self) -> None:
        """The keys' values against each other, and against the flow's own check. The built-in flows' checks
        read no file; a plug-in flow named by file or module is loaded to be asked (its top-level code runs
        once a process). What needs the disk or a method (the out folder, each method, each cell) is
        checked once for a run, by `check_run`."""
        from harness.core.plumbing.plugins import called

        served = flow.get(self.grid.flow)
        called("flow", served.name, served.check, self)
        if self.grid.model_tag is not None and not methods.NAME.fullmatch(self.grid.model_tag):
            problem = (
                f"{self.grid.model_tag!r} names a results folder: use letters, digits, '.', '_' or '-' (no "
                "paths)"
            )
            raise SettingsError.of("model_tag", problem)

    def loaded_scores(self) -> list[tuple]:
        """(Score, its settings) for each plug-in score of `scores`, each detector registered."""
        from contamination.detectors import load_score

        out = []
        for target, settings in self.grid.scores.items():
            try:
                score = load_score(target)
            except ValueError as err:
                raise SettingsError.of("scores", f"{err}; fix the file, or drop the key") from None
            if not isinstance(settings, dict):
                raise SettingsError.of("scores", f"{target}: its settings {settings!r} must be a mapping")
            out.append((score, settings))
        return out

    def run_configs(self) -> list[GridConfig]:
        """One config per cell: `cells` expanded, or this config's own m, n, subsamples."""
        out = []
        for cell in self.grid.cells:
            try:
                m, n, subsamples = (int(x) for x in cell.split("/"))
            except ValueError:
                problem = f"entries look like 'm/n/subsamples' (e.g. 50/500/20), got {cell!r}"
                raise SettingsError.of("cells", problem) from None
            out.append(self.replace(m=m, n=n, subsamples=subsamples, cells=[]))
        return [c for cell in out or [self] for c in cell.per_method()]

    def per_method(self) -> list[GridConfig]:
        """One config per method of `methods` and per dose of `doses` (each into its own model folder),
        or this one."""
        if not self.grid.methods and not self.grid.doses:
            return [self]
        out, named = [], self.grid.methods or [self.grid.method or flow.default_method(self.grid.flow)]
        stray = set(self.grid.doses) - set(named) - {methods.find(name).name for name in named}
        if stray:  # the flow's default method runs where the config names none: known only here
            problem = f"{sorted(stray)[0]} is not among the run's methods {named}: name it there"
            raise SettingsError.of("doses", problem)
        for name in named:
            key = methods.find(name).name
            own = {k: v for k, v in self.grid.method_settings.items() if k == key}
            dkey = name if name in self.grid.doses else key
            swept = self.grid.doses.get(dkey) or {}
            for setting, values in swept.items() or [(None, [None])]:
                for value in values:
                    settings = own if setting is None else {key: {**own.get(key, {}), setting: value}}
                    doses = {} if setting is None else {dkey: {setting: [value]}}
                    out.append(self.replace(method=name, methods=[], method_settings=settings, doses=doses))
        return out

    def dose(self) -> str | None:
        """'setting=value' of this config's one dose (`doses` after per_method), or None."""
        for swept in self.grid.doses.values():
            for setting, values in swept.items():
                if len(values) == 1:
                    value = f"{values[0]:g}" if isinstance(values[0], float) else values[0]
                    return f"{setting}={value}"
        return None

    def method_target(self) -> str:
        """The method as this config names it, or its flow's default method: how any process finds it."""
        return self.grid.method or flow.default_method(self.grid.flow)

    def adaptation(self) -> methods.Method:
        """The method this config audits (its flow's study method by default). A run finds it once, in its
        plan (harness/grid/configuration/plan.py)."""
        return methods.find(self.method_target())

    @property
    def slugs(self) -> list[str]:
        if self.grid.tasks == ["all"]:
            return all_slugs(self.sample.include_path)
        return [t.removeprefix(TASK_PREFIX) for t in self.grid.tasks]


def config_path(name: str | Path) -> Path:
    """A config file, or a shipped one by name (`demo`) or as `configs/demo.yaml`."""
    path = Path(name)
    if path.is_file():
        return path
    if path.suffix not in (".yaml", ".yml") and (CONFIGS_DIR / f"{name}.yaml").is_file():
        return CONFIGS_DIR / f"{name}.yaml"
    if path.parent == Path("configs") and (CONFIGS_DIR / path.name).is_file():
        return CONFIGS_DIR / path.name
    return path


@functools.cache
def with_sections(name: str, extra: tuple) -> type[GridConfig]:
    """GridConfig with a plug-in flow's own sections (name, class, title) beside the shared ones."""
    sections = GridConfig.SECTIONS | {key: cls for key, cls, _ in extra}
    titles = GridConfig.TITLES | {key: title for key, _, title in extra}
    return type(f"GridConfig[{name}]", (GridConfig,), {"SECTIONS": sections, "TITLES": titles})


def config_class(raw: object, overrides: dict | None = None) -> type[GridConfig]:
    """The config class of a config's flow: GridConfig, composed with the sections a plug-in flow
    brings (a built-in flow's are GridConfig's own)."""
    name = (overrides or {}).get("flow") or (raw.get("flow") if isinstance(raw, dict) else None)
    if not isinstance(name, str) or name in flow.builtin():
        return GridConfig
    found = flow.get(name)  # a flow that cannot load is the config's first error, naming the flow
    try:
        extra = tuple((k, *section_of(found, k, spec)) for k, spec in found.sections.items())
    except SettingsError:  # refused, it is not kept: its sections would be read by this process's next run
        flow.FLOWS.pop(found.name)
        raise
    return with_sections(found.name, extra) if extra else GridConfig


def section_of(found: flow.Flow, key: str, spec: object) -> tuple[type, str]:
    """A plug-in flow's section, checked: a (Settings dataclass, title) pair under a name of its own,
    whose keys no other section holds; else one line naming the flow's file and the fix."""
    import dataclasses

    from harness.core.plumbing.plugins import where
    from harness.core.plumbing.settings import Settings

    source = f"flow {found.name!r} ({where(found.compute)})"
    ok = isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], type)
    if not ok or not (issubclass(spec[0], Settings) and dataclasses.is_dataclass(spec[0])):
        raise SettingsError(
            f"{source}: its section {key!r} is {spec!r}; a section is (a Settings dataclass, its title): "
            "fix that file"
        )
    if key in GridConfig.SECTIONS:
        raise SettingsError(
            f"{source}: its section is named {key!r}, a section every config has: name it otherwise"
        )
    clash = sorted(set(field_names(spec[0])) & set(field_names(GridConfig)))
    if clash:
        raise SettingsError(
            f"{source}: its section {key!r} declares {clash}, key(s) a config already has: name them "
            "otherwise"
        )
    return spec[0], str(spec[1])


def read_file(path: Path):
    """A config file's YAML, each way it cannot be read said naming the file and the fix."""
    try:
        return yaml_files.load(path.read_text())
    except yaml_files.DuplicateKey as err:
        raise SettingsError(f"{path}: {err.problem}") from None
    except UnicodeDecodeError as err:
        line = path.read_bytes()[: err.start].count(b"\n") + 1
        raise SettingsError(
            f"{path}: line {line} is not UTF-8 (byte {err.object[err.start]:#x}): save it as UTF-8"
        ) from None
    except (OSError, yaml.YAMLError) as err:
        shipped = [p.stem for p in sorted(CONFIGS_DIR.glob("*.yaml"))]
        near = did_you_mean([path.stem], shipped) if isinstance(err, FileNotFoundError) else ""
        problem = f"cannot read the config ({err}){near}; shipped configs: {', '.join(shipped)}"
        raise SettingsError(f"{path}: {problem}") from err


def check_plug_in_files(raw, path: Path, overrides: dict) -> None:
    """A plug-in's file that only the config's folder holds: said with both fixes (plugins.only_beside)."""
    for key in PLUG_IN_KEYS if isinstance(raw, dict) else ():
        for target in raw[key] if isinstance(raw.get(key), list) else [raw.get(key)]:
            found = plugins.only_beside(target, path.resolve().parent) if isinstance(target, str) else None
            if found and key not in overrides:
                raise SettingsError(f"{path}: key {key!r} {found}")


def load_config(path: str | Path, overrides: dict | None = None) -> GridConfig:
    """Read and check a grid config (a file, or a shipped config's name) with `overrides` (from flags)
    on top: known keys, types, the base, known tasks, pools large enough for m + 2n. What needs the run
    (its out folder, its methods, its plug-ins) is checked once by the run (run_checks.load_run)."""
    path = config_path(path)
    raw = read_file(path)
    overrides = overrides or {}
    check_plug_in_files(raw, path, overrides)
    try:
        cls = config_class(raw, overrides)
    except SettingsError as err:
        raise as_set(err, path, overrides) from None
    if isinstance(raw, dict):
        raw = study_layout.read_old_keys(raw, set(field_names(cls)), str(path))
        raw = narrowed(against_folder(raw, path.resolve().parent), overrides)
    try:
        cfg = from_mapping(cls, raw, str(path))  # its older keys were read above
        cells = cfg.run_configs()
    except SettingsError as err:
        raise as_set(err, path, overrides) from None
    where = flag("base") if "base" in overrides else f"{path}: key 'base'"  # as the user named it
    try:
        models.check_base(models.resolve(cfg.model.base))
    except UserError as err:
        raise type(err)(f"{where}: {err}; name a local model dir, a hub id, or {SMOLLM2}") from None
    served = flow.get(cfg.grid.flow)
    problem = served.check_base(models.resolve(cfg.model.base))
    if problem:
        raise SettingsError(f"{where}: {cfg.model.base} {problem}")
    for slug in cfg.slugs:
        try:
            spec = find_spec(slug, cfg.sample.include_path)
            problem = served.check_task(spec)
            if problem:
                raise SettingsError(problem)
            answering = answering_problems(spec)  # else every answer is read wrong, and the run says nothing
            if answering:
                raise SettingsError(f"{'; '.join(answering)} (`tapt-bench tasks validate` says the same)")
            for cell in cells:
                draw_rows(spec, cell.sample, 0)
        except UserError as err:
            named = slug in str(err)  # most task errors name their task already
            flags = [flag(k) for k in TASK_KEYS if k in overrides]  # what the user set on the command line
            where = f"{', '.join(flags)} (over {path})" if flags else str(path)
            raise type(err)(f"{where}: {err}" if named else f"{where}: task {slug!r}: {err}") from err
    return cfg


PLUG_IN_KEYS = ("flow", "method", "methods")  # a plug-in's `file.py:NAME`, found from the working folder
TASK_KEYS = ("tasks", "m", "n", "cells", "data_dir", "include_path", "flow")  # what a task's check reads


def as_set(err: SettingsError, path: Path, overrides: dict) -> SettingsError:
    """The error named as the user set its key: the flag where one set it, else the config file's key."""
    if err.key in overrides:
        return SettingsError(f"{flag(err.key)} {err.problem}", err.key, err.problem)
    return err.at(str(path))


def read(raw: dict, source: str) -> GridConfig:
    """A config from its keys, the older spelling of a method's settings read as the new (with a note)."""
    cls = config_class(raw)
    if isinstance(raw, dict):
        raw = study_layout.read_old_keys(raw, set(field_names(cls)), source)
    return from_mapping(cls, raw, source)


def narrowed(raw: dict, overrides: dict) -> dict:
    """`overrides` on top of the file's keys, a method's section of method_settings key by key; where the
    flags name the methods, the file's sections of its own methods that they leave out are dropped, so
    that one config serves a run of some of its methods (or of another)."""
    settings, given = raw.get("method_settings") or {}, overrides.get("method_settings")
    if isinstance(settings, dict) and isinstance(given, dict):
        both = {k: {**settings[k], **v} for k, v in given.items() if isinstance(settings.get(k), dict)}
        raw, overrides = raw | {"method_settings": {**settings, **given, **both}}, dict(overrides)
        del overrides["method_settings"]
    settings = raw.get("method_settings")
    if ("methods" in overrides or "method" in overrides) and isinstance(settings, dict):
        try:  # by the names method_settings uses: a method may be named by its file or entry point
            run = {methods.find(n).name for n in study_layout.run_methods(raw | overrides)}
            own = {methods.find(n).name for n in study_layout.run_methods(raw)} - set(given or {})
        except (SettingsError, TypeError, StopIteration):
            return raw | overrides  # the config's own check names the method or the flow
        raw = raw | {"method_settings": {k: v for k, v in settings.items() if k in run or k not in own}}
    return raw | overrides


def against_folder(raw: dict, folder: Path) -> dict:
    """The config's input paths (PATHS: data_dir, include_path) resolved against its folder."""
    return {k: against(folder, v) if k in GridConfig.merged("PATHS") else v for k, v in raw.items()}
