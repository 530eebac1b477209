"""A grid config: one experiment (base, tasks, cells, flow, training settings), read from YAML and flags
with every key checked before anything is written."""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Literal

import yaml

from contamination import codec
from contamination.exposure import check_sizes
from contamination.exposure_run import ExposureSettings
from harness import results
from harness.core import conditions, models
from harness.core.errors import SettingsError, UserError
from harness.core.models import SMOLLM2, ModelSettings
from harness.core.settings import (
    Settings,
    against,
    field_names,
    fingerprint,
    flag,
    from_mapping,
    merged,
    option,
    pick,
)
from harness.scoring.classifier import STUDY_TASK_OVERRIDES, ClassifierSettings
from harness.tasks.protocol import draw_rows, find_spec
from harness.tasks.spec import TASK_PREFIX, all_slugs
from harness.tasks.subsample import SampleSettings
from tapt import methods
from tapt.adapter import AdapterSettings, LoraTrainingSettings
from tapt.raw_text import TextSettings

CONFIGS_DIR = Path(__file__).resolve().parent / "configs"  # the ready configs shipped with the package


@dataclass(kw_only=True)
class GridConfig(
    SampleSettings, ModelSettings, AdapterSettings, TextSettings, ClassifierSettings, ExposureSettings
):
    """One experiment: a base model, tasks, the cell(s) (m, n), the flow and its training settings
    (see harness/grid/configs/*.yaml).

    The sample, model, adapter and pretraining keys are those of `tapt-bench train` and
    `pretrain-text`, with the same meaning and defaults. In a config file, the input paths (data_dir,
    include_path) resolve against the file's folder; `out` against the directory the run starts from.
    """

    MINIMUM = {"subsamples": 1, "eval_batch_size": 1, "codec_context": 0, "stream_chunks": 2}
    NOT_IN_RESULTS = ("tasks", "subsamples", "cells", "out", "model_tag", "notes", "data_dir", "include_path")

    flow: Literal["zero_shot", "classifier"] = option(
        "zero_shot",
        "zero_shot: prompt adapters scored zero-shot; classifier: TAPT on raw texts, then a head "
        "fine-tuned on train",
    )
    task_overrides: dict[str, dict] = option(
        STUDY_TASK_OVERRIDES, "per-task settings {slug: {key: value}} (default: the study's long-text tasks)"
    )
    conditions: list[str] = option(
        list(conditions.PAIRED),
        f"conditions scored per unit; add {conditions.LEAK} for TAPT on test's prompts with their answers "
        "(planted labeled contamination: a positive control for the bias), and stream for test scored "
        "first, then adapted on: test cut into stream_chunks chunks, each scored by the method adapted "
        "on the chunks before it (what legitimate online test-time adaptation gains)",
    )
    stream_chunks: int = option(
        4, "with the stream condition: the chunks test is cut into (the first is scored by the base)"
    )
    method: str | None = option(
        None,
        "the adaptation method audited: a built-in (`tapt-bench methods list`), an installed entry point, "
        "package.module:attr or path/to/file.py:attr (default: the flow's default method, the study's); "
        "another method's units go to <model>+<method>",
    )
    methods: list[str] = option(
        [],
        "several methods side by side, each run on the same subsamples into its own model folder "
        "(empty: the one `method`)",
    )
    method_settings: dict[str, dict] = option(
        {},
        "each method's settings, {method: {key: value}} (`tapt-bench methods show NAME` lists them); the "
        "flow's default method may also take its settings as this config's own keys (epochs, lr, ...)",
    )
    exposure: bool = option(
        False,
        "run the exposure test in every unit: score test and extra documents under each condition's "
        "model (the text statistic from text_score, and the label margin); base is the reference",
    )
    codec_context: int = option(
        0,
        "with exposure: also CoDeC (Zawalski et al. 2025), each test and extra document scored again with "
        "this many documents of its own split before it (the authors use 1; one draw serves 8 documents); "
        "0: off (each document is read once more)",
    )
    scores: dict[str, dict] = option(
        {},
        "with exposure: your per-document scores, {path/to/file.py:SCORE: {setting: value}}; each is "
        "computed for every condition's model and read by its detector (contamination calibrate)",
    )
    tasks: list[str] = option(["all"], "task slugs (a single slug is one task), or all")
    subsamples: int = option(20, "subsamples per task")
    cells: list[str] = option(
        [],
        "several cells in one run, each 'm/n/subsamples' (e.g. 50/500/20); empty: the one cell m, "
        "n, subsamples",
    )
    eval_batch_size: int = option(8, "lm-eval scoring batch size")
    out: str = option("results", "results root; units go to <out>/m<m>/n<n>/<model>/<task>/")
    model_tag: str | None = option(None, "folder name of the model (default: the base's last path part)")
    notes: str | None = option(None, "free-form, kept in the manifest")

    def __post_init__(self) -> None:
        if isinstance(self.tasks, str):
            self.tasks = [self.tasks]
        self.fold_default_section()
        super().__post_init__()

    def fold_default_section(self) -> None:
        """The flow's default method keeps its settings in this config's own keys (the study's layout, on
        which every settings hash and results folder rests); its section of method_settings, when given,
        is read into them, so that both spellings make the same run."""
        if not isinstance(self.method_settings, dict) or self.flow not in methods.FLOWS:
            return  # the type checks that follow name the problem
        default = methods.find(methods.for_flow(self.flow))
        section = self.method_settings.get(default.name)
        if section is None:
            return
        own = field_names(default.settings)
        if not isinstance(section, dict) or set(section) - set(own):
            unknown = sorted(set(section) - set(own)) if isinstance(section, dict) else section
            problem = f"{default.name}: {unknown!r} are not its settings; its keys are {own}"
            raise SettingsError.of("method_settings", problem)
        defaults = {
            f.name: f.default for f in dataclasses.fields(default.settings) if f.default is not MISSING
        }
        for name, value in section.items():
            flat = getattr(self, name)
            if name in defaults and flat != defaults[name] and flat != value:
                problem = f"sets {default.name}'s {name} to {value!r}, and the key {name} sets {flat!r}; "
                problem += "set it once"
                raise SettingsError.of("method_settings", problem)
            setattr(self, name, value)
        self.method_settings = {k: v for k, v in self.method_settings.items() if k != default.name}

    def check(self) -> None:
        super().check()
        chosen = set(self.conditions)
        if len(chosen) < len(self.conditions) or not set(conditions.PAIRED) <= chosen <= set(conditions.ALL):
            allowed = f"{', '.join(conditions.PAIRED)} and optionally {', '.join(conditions.OPTIONAL)}"
            problem = f"must be {allowed}, got {self.conditions}"
            raise SettingsError.of("conditions", problem)
        self.conditions = [c for c in conditions.ALL if c in self.conditions]
        if not self.tasks:
            problem = "is empty: name at least one task (see `tapt-bench tasks list`)"
            raise SettingsError.of("tasks", problem)
        problem = results.folder_problem(self.out)
        if problem:
            raise SettingsError.of("out", problem)
        fixed = set(self.NOT_IN_RESULTS) | {"flow", "task_overrides", "m", "n", "seed", "base"}
        for slug, values in self.task_overrides.items():
            keys = set(values) if isinstance(values, dict) else {f"{values!r} (not a mapping)"}
            bad = sorted(keys - set(field_names(GridConfig)) | keys & fixed)
            if bad:
                problem = (
                    f"{slug}: {bad} cannot be set per task; per-task keys are training settings "
                    "such as clf_epochs"
                )
                raise SettingsError.of("task_overrides", problem)
        if self.methods and self.method:
            problem = (
                f"and methods are both set ({self.method!r}, {self.methods}); name every method in methods"
            )
            raise SettingsError.of("method", problem)
        key = "methods" if self.methods else "method"
        if self.model_tag is not None and not methods.NAME.fullmatch(self.model_tag):
            problem = (
                f"{self.model_tag!r} names a results folder: use letters, digits, '.', '_' or '-' (no paths)"
            )
            raise SettingsError.of("model_tag", problem)
        used = set()
        for config in self.per_method():
            method = config.adaptation()
            if method.name in used:
                problem = f"names {method.name} twice ({self.methods}); name each method once"
                raise SettingsError.of(key, problem)
            if self.flow not in method.flows:
                problem = f"{method.name} serves the flow(s) {list(method.flows)}, and flow is {self.flow!r}"
                raise SettingsError.of(key, problem)
            config.settings_of(method)  # checks them
            used.add(method.name)
        unused = sorted(set(self.method_settings) - used)
        if unused:
            problem = f"names {unused}, which this run does not use (methods: {sorted(used)})"
            raise SettingsError.of("method_settings", problem)
        if self.codec_context and not (self.exposure and self.flow == "zero_shot"):
            problem = "is CoDeC within the exposure test of the zero_shot flow: set exposure: true, or 0"
            raise SettingsError.of("codec_context", problem)
        if self.scores and not (self.exposure and self.flow == "zero_shot"):
            problem = "are computed within the exposure test of the zero_shot flow: set exposure: true"
            raise SettingsError.of("scores", problem)
        self.loaded_scores()  # each one importable, a Score, its settings a mapping
        if conditions.STREAM in self.conditions and self.flow != "zero_shot":
            problem = f"{conditions.STREAM} scores test in chunks zero-shot: it needs flow: zero_shot"
            raise SettingsError.of("conditions", problem)
        for cell in self.cell_configs():  # checks the form of each cell
            if self.codec_context > cell.n - 1:
                problem = (
                    f"is {self.codec_context}, and a document of a cell with n {cell.n} has {cell.n - 1} "
                    f"others in its split to stand before it; set at most {cell.n - 1} (the authors use 1)"
                )
                raise SettingsError.of("codec_context", problem)
            if conditions.STREAM in self.conditions and self.stream_chunks > cell.n:
                problem = f"is {self.stream_chunks}, more than a cell's {cell.n} test documents; lower it"
                raise SettingsError.of("stream_chunks", problem)
            if self.exposure:
                try:
                    check_sizes(cell.n, cell.n)
                except UserError as err:
                    raise SettingsError(f"exposure: {err}", "exposure", str(err)) from None

    def loaded_scores(self) -> list[tuple]:
        """(Score, its settings) for each plug-in score of `scores`, each detector registered."""
        from contamination.detectors import load_score

        out = []
        for target, settings in self.scores.items():
            try:
                score = load_score(target)
            except ValueError as err:
                raise SettingsError.of("scores", f"{err}; fix the file, or drop the key") from None
            if not isinstance(settings, dict):
                raise SettingsError.of("scores", f"{target}: its settings {settings!r} must be a mapping")
            out.append((score, settings))
        return out

    def cell_configs(self) -> list[GridConfig]:
        """One config per cell: `cells` expanded, or this config's own m, n, subsamples."""
        out = []
        for cell in self.cells:
            try:
                m, n, subsamples = (int(x) for x in cell.split("/"))
            except ValueError:
                problem = f"entries look like 'm/n/subsamples' (e.g. 50/500/20), got {cell!r}"
                raise SettingsError.of("cells", problem) from None
            out.append(dataclasses.replace(self, m=m, n=n, subsamples=subsamples, cells=[]))
        return [c for cell in out or [self] for c in cell.per_method()]

    def per_method(self) -> list[GridConfig]:
        """One config per method of `methods` (each into its own model folder), or this one."""
        if not self.methods:
            return [self]
        out = []
        for name in self.methods:
            own = {k: v for k, v in self.method_settings.items() if k == methods.find(name).name}
            out.append(dataclasses.replace(self, method=name, methods=[], method_settings=own))
        return out

    def for_task(self, slug: str) -> GridConfig:
        """These settings with the task's overrides applied (checked like any settings)."""
        return dataclasses.replace(self, **self.task_overrides.get(slug, {}))

    def adaptation(self) -> methods.Method:
        """The method this run audits (the flow's study method by default)."""
        return methods.find(self.method or methods.for_flow(self.flow))

    def is_study_method(self) -> bool:
        return self.adaptation().name == methods.for_flow(self.flow)

    def settings_of(self, method: methods.Method, slug: str | None = None) -> Settings:
        """The method's settings: the study method's from this config's keys (with the task's
        overrides), another's from method_settings."""
        if method.name == methods.for_flow(self.flow):
            return method.settings(**pick(self.for_task(slug) if slug else self, method.settings))
        try:
            return method.configured(self.method_settings.get(method.name), method.name)
        except SettingsError as err:
            raise SettingsError(f"method_settings {err}", "method_settings", str(err)) from None

    @property
    def tag(self) -> str:
        """The results folder of the model: the base's name, with `+method` for a method other than
        the flow's study method (the analysis reads it as the LM type)."""
        name = self.model_tag or Path(self.base.rstrip("/")).name
        return name if self.is_study_method() else f"{name}+{self.adaptation().name}"

    @property
    def slugs(self) -> list[str]:
        if self.tasks == ["all"]:
            return all_slugs(self.include_path)
        return [t.removeprefix(TASK_PREFIX) for t in self.tasks]

    def result_settings(self) -> dict:
        """The settings that can change a unit's numbers (those of its flow); recorded with every unit."""
        if self.flow == "classifier":
            other = field_names(AdapterSettings)
        else:
            other = [*field_names(TextSettings), *field_names(ClassifierSettings)]
        out = {k: v for k, v in dataclasses.asdict(self).items() if k not in (*self.NOT_IN_RESULTS, *other)}
        if conditions.STREAM not in out["conditions"]:  # recorded only with its condition: older units match
            del out["stream_chunks"]
        if out["conditions"] == list(conditions.PAIRED):  # recorded only when it adds one: older units match
            del out["conditions"]
        if not out["exposure"]:  # likewise: recorded only when on, and then with its statistic
            del out["exposure"], out["text_score"]
            out.pop("codec_context"), out.pop("scores")
        out = recorded(out)
        if out.get("codec_context"):  # the tokens CoDeC scores (the authors' span): units of another differ
            out["codec_span"] = [codec.SKIP_FIRST, -codec.DROP_LAST]
            out["codec_block"] = codec.BLOCK  # documents that share a context
        del out["method"], out["methods"], out["method_settings"]
        if not self.is_study_method():  # another method: its name and settings, not the study's keys
            method = self.adaptation()
            for key in field_names(LoraTrainingSettings):  # prompt TAPT's; quantize stays: the base's form
                out.pop(key, None)
            out["method"] = method.name
            out["method_settings"] = recorded(dataclasses.asdict(self.settings_of(method)))
        return out

    def settings_hash(self) -> str:
        return fingerprint(self.result_settings())

    def base_settings(self) -> dict:
        """The settings that can change the base's own scores in a unit: the result settings without the
        method's (methods side by side with equal base settings share the base's scores)."""
        out = self.result_settings()
        method_keys = ("method", "method_settings", "conditions", "stream_chunks")
        for key in (*method_keys, *field_names(LoraTrainingSettings)):
            out.pop(key, None)
        return out


def recorded(settings: dict) -> dict:
    """The settings without `bf16`, `codec_context` or `scores` where they are off: a key added after
    units were first recorded is recorded only when on, so that older units keep their hash."""
    return {k: v for k, v in settings.items() if k not in ("bf16", "codec_context", "scores") or v}


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


def load_config(path: str | Path, overrides: dict | None = None) -> GridConfig:
    """Read and check a grid config (a file, or a shipped config's name) with `overrides` (from flags)
    on top: known keys, types, known tasks, pools large enough for m + 2n."""
    path = config_path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        shipped = ", ".join(p.stem for p in sorted(CONFIGS_DIR.glob("*.yaml")))
        raise SettingsError(f"{path}: cannot read the config ({err}); shipped configs: {shipped}") from err
    overrides = overrides or {}
    if isinstance(raw, dict):
        raw = against_folder(raw, path.resolve().parent) | overrides
    try:
        cfg = from_mapping(GridConfig, raw, str(path))
    except SettingsError as err:
        if err.key not in overrides:
            raise
        raise SettingsError(f"{flag(err.key)} {err.problem}", err.key, err.problem) from None
    where = flag("base") if "base" in overrides else f"{path}: key 'base'"  # as the user named it
    try:
        models.check_base(models.resolve(cfg.base))
    except UserError as err:
        raise type(err)(f"{where}: {err}; name a local model dir, a hub id, or {SMOLLM2}") from None
    if cfg.flow == "zero_shot" and not models.is_decoder(models.resolve(cfg.base)):
        raise SettingsError(
            f"{where}: {cfg.base} is an encoder, and the zero_shot flow scores prompts with a causal LM; "
            "name a causal LM (e.g. SmolLM2-135M-Instruct) or set flow: classifier"
        )
    for slug in cfg.slugs:
        try:
            spec = find_spec(slug, cfg.include_path)
            if cfg.flow == "classifier" and spec.classes is None:
                raise SettingsError(
                    "flow classifier trains a head over fixed classes, and this task's choices differ "
                    "from doc to doc; run it with flow: zero_shot"
                )
            for cell in cfg.cell_configs():
                draw_rows(spec, cell, 0)
        except UserError as err:
            named = slug in str(err)  # most task errors name their task already
            raise type(err)(f"{path}: {err}" if named else f"{path}: task {slug!r}: {err}") from err
    return cfg


def against_folder(raw: dict, folder: Path) -> dict:
    """The config's input paths (PATHS: data_dir, include_path) resolved against its folder."""
    return {k: against(folder, v) if k in merged(GridConfig, "PATHS") else v for k, v in raw.items()}
