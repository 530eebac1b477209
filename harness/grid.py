"""The experiment grid: for each (task, subsample) unit, score base, TAPT on extra, TAPT on test.

Two flows: zero_shot (prompt adapters, scored zero-shot through lm-eval) and classifier (raw-text
pretraining, then a classification head fine-tuned on train)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import yaml

from harness import results
from harness.classifier import STUDY_TASK_OVERRIDES, ClassifierSettings
from harness.data import load_pool
from harness.splits import subsample_docs
from harness.errors import SettingsError, UserError
from harness.models import ModelSettings, resolve
from harness.zero_shot import score, scorer
from harness.settings import (against, differences, field_names, fingerprint, flag, from_mapping, merged, option,
                              pick)
from harness.spec import all_slugs, load_spec
from harness.subsample import SampleSettings, draw
from tapt.adapter import AdapterSettings
from tapt.corpus import CONDITIONS
from tapt.raw_text import TextSettings

log = logging.getLogger("tapt_bench.grid")
PAIRED = ["base", "extra", "test"]  # the study's three conditions; every unit scores them


@dataclass(kw_only=True)
class GridConfig(SampleSettings, ModelSettings, AdapterSettings, TextSettings, ClassifierSettings):
    """One experiment: a base model, tasks, the cell(s) (m, n), the flow and its training settings
    (see harness/configs/*.yaml).

    The sample, model, adapter and pretraining keys are those of `tapt-bench train` and
    `pretrain-text`, with the same meaning and defaults. In a config file, the input paths (data_dir, include_path) resolve against the file's
    folder; `out` against the directory the run starts from.
    """

    MINIMUM = {"subsamples": 1, "eval_batch_size": 1}
    NOT_IN_RESULTS = ("tasks", "subsamples", "cells", "out", "model_tag", "notes", "data_dir", "include_path")

    flow: Literal["zero_shot", "classifier"] = option(
        "zero_shot", "zero_shot: prompt adapters scored zero-shot; classifier: raw-text TAPT, then a head fine-tuned on train")
    task_overrides: dict[str, dict] = option(
        STUDY_TASK_OVERRIDES, "per-task settings {slug: {key: value}} (default: the study's long-text tasks)")
    conditions: list[str] = option(
        PAIRED, "conditions scored per unit; add leak for TAPT on test's prompts with their answers "
        "(planted labeled contamination: a positive control for the bias)")
    tasks: list[str] = option(["all"], "task slugs (a single slug is one task), or all")
    subsamples: int = option(20, "subsamples per task")
    cells: list[str] = option(
        [], "several cells in one run, each 'm/n/subsamples' (e.g. 50/500/20); empty: the one cell m, n, subsamples")
    eval_batch_size: int = option(8, "lm-eval scoring batch size")
    out: str = option("results", "results root; units go to <out>/m<m>/n<n>/<model>/<task>/")
    model_tag: str | None = option(None, "folder name of the model (default: the base's last path part)")
    notes: str | None = option(None, "free-form, kept in the manifest")

    def __post_init__(self) -> None:
        if isinstance(self.tasks, str):
            self.tasks = [self.tasks]
        super().__post_init__()

    def check(self) -> None:
        super().check()
        if sorted(self.conditions) not in (sorted(PAIRED), sorted([*PAIRED, "leak"])):
            problem = f"must be base, extra, test and optionally leak, got {self.conditions}"
            raise SettingsError(f"conditions {problem}", "conditions", problem)
        self.conditions = [c for c in ("base", *CONDITIONS) if c in self.conditions]
        fixed = set(self.NOT_IN_RESULTS) | {"flow", "task_overrides", "m", "n", "seed", "base"}
        for slug, values in self.task_overrides.items():
            keys = set(values) if isinstance(values, dict) else {f"{values!r} (not a mapping)"}
            bad = sorted(keys - set(field_names(GridConfig)) | keys & fixed)
            if bad:
                problem = f"{slug}: {bad} cannot be set per task; per-task keys are training settings such as clf_epochs"
                raise SettingsError(f"task_overrides {problem}", "task_overrides", problem)
        self.cell_configs()  # checks the form of each cell

    def cell_configs(self) -> list["GridConfig"]:
        """One config per cell: `cells` expanded, or this config's own m, n, subsamples."""
        out = []
        for cell in self.cells:
            try:
                m, n, subsamples = (int(x) for x in cell.split("/"))
            except ValueError:
                problem = f"entries look like 'm/n/subsamples' (e.g. 50/500/20), got {cell!r}"
                raise SettingsError(f"cells {problem}", "cells", problem) from None
            out.append(dataclasses.replace(self, m=m, n=n, subsamples=subsamples, cells=[]))
        return out or [self]

    def for_task(self, slug: str) -> "GridConfig":
        """These settings with the task's overrides applied (checked like any settings)."""
        return dataclasses.replace(self, **self.task_overrides.get(slug, {}))

    @property
    def tag(self) -> str:
        return self.model_tag or Path(self.base.rstrip("/")).name

    @property
    def slugs(self) -> list[str]:
        return all_slugs(self.include_path) if self.tasks == ["all"] else [t.removeprefix("tapt_") for t in self.tasks]

    def result_settings(self) -> dict:
        """The settings that can change a unit's numbers (those of its flow); recorded with every unit."""
        other = field_names(AdapterSettings) if self.flow == "classifier" else [
            *field_names(TextSettings), *field_names(ClassifierSettings)]
        out = {k: v for k, v in dataclasses.asdict(self).items() if k not in (*self.NOT_IN_RESULTS, *other)}
        if out["conditions"] == PAIRED:  # recorded only when it adds leak: older units match the default
            del out["conditions"]
        return out


CONFIGS_DIR = Path(__file__).resolve().parent / "configs"  # the ready configs shipped with the package


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
    for slug in cfg.slugs:
        try:
            labels = load_pool(load_spec(slug, cfg.include_path), cfg.data_dir)["label"].to_numpy()
            for cell in cfg.cell_configs():
                draw(labels, 0, cell.m, cell.n, cell.seed)
        except UserError as err:
            raise type(err)(f"{path}: task {slug!r}: {err}") from err
    return cfg


def against_folder(raw: dict, folder: Path) -> dict:
    """The config's input paths (PATHS: data_dir, include_path) resolved against its folder."""
    return {k: against(folder, v) if k in merged(GridConfig, "PATHS") else v for k, v in raw.items()}


def units(cfg: GridConfig, shard: tuple[int, int] = (0, 1)) -> list[tuple[str, int]]:
    """The (task, subsample) units of this shard: every N-th unit of a fixed order, from the i-th."""
    i, count = shard
    everything = [(slug, k) for slug in cfg.slugs for k in range(cfg.subsamples)]
    return everything[i::count]


def majority(docs: dict[str, pd.DataFrame], num_classes: int) -> dict[str, float]:
    """Accuracy on test of the train subsample's most frequent class (ties: the lowest label)."""
    top = int(np.bincount(docs["train"]["label"], minlength=num_classes).argmax())
    return {"majority": float((docs["test"]["label"] == top).mean()), "num_classes": num_classes,
            "majority_all": 1.0 / num_classes}


@dataclass
class Unit:
    """One finished (task, subsample) unit: what `write_unit` records under the task's results dir."""

    slug: str
    k: int
    accs: dict
    probs: pd.DataFrame  # per test document and condition: class probabilities, prediction, correct
    meta: dict  # settings, their hash, seconds per stage, training records


_LOADED: dict = {}  # the zero-shot base of this process, kept loaded for every unit it runs (local or Ray worker)


def loaded_base(cfg: GridConfig):
    """(model, tokenizer) of cfg's base, loaded once per process; a different base replaces it."""
    from transformers import AutoTokenizer

    from tapt.adapter import load_base

    if base_key(cfg) not in _LOADED:
        _LOADED.clear()
        path = resolve(cfg.base)
        _LOADED[base_key(cfg)] = load_base(path, cfg.quantize, cfg.fallback_lora)[0], AutoTokenizer.from_pretrained(path)
    return _LOADED[base_key(cfg)]


def base_key(cfg: GridConfig) -> tuple:
    return cfg.base, cfg.quantize, cfg.fallback_lora


def compute_unit(cfg: GridConfig, slug: str, k: int, keep_adapters: bool = False) -> Unit:
    """Compute one unit of either flow; nothing is written but kept adapters."""
    if cfg.flow == "classifier":
        return classifier_unit(cfg, slug, k)
    try:
        return run_unit(cfg, slug, k, keep_adapters)
    except BaseException:
        _LOADED.clear()  # a unit that failed mid-way may leave its adapter in the base: never reuse that
        raise


def run_unit(cfg: GridConfig, slug: str, k: int, keep_adapters: bool) -> Unit:
    """Score base, then train and score one adapter per TAPT condition, detaching each after use."""
    from tapt import output
    from tapt.adapter import AdapterArgs, prepare, record_of

    base, tokenizer = loaded_base(cfg)
    spec = load_spec(slug, cfg.include_path)
    sample = pick(cfg, SampleSettings)
    meta = {**sample, "subsample": k, "split": "test"}
    tdir = results.task_dir(Path(cfg.out), cfg.m, cfg.n, cfg.tag, slug)
    seconds, training = {}, {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        seconds[name], clock = time.perf_counter() - clock, time.perf_counter()
        log.info("%s subsample %d: %s done (%.1f s)", slug, k, name, seconds[name])

    scored = {"base": score(scorer(base, tokenizer, cfg.eval_batch_size), spec, meta, cfg.include_path)}
    lap("score_base")
    for cond in cfg.conditions[1:]:  # extra, test (and leak): each trains an adapter on its split's prompts
        split, answers = CONDITIONS[cond]
        args = AdapterArgs(**sample, **pick(cfg, AdapterSettings), task=slug, split=split, answers=answers,
                           subsample=k, base=resolve(cfg.base), out=str(tdir / "adapters" / f"{k}_{cond}"))
        with tempfile.TemporaryDirectory() as work:  # the Trainer's scratch dir
            run = prepare(args, Path(work), model=base)
            run.trainer.train()
        rec = record_of(args, run)
        training[cond] = {key: v for key, v in rec.items() if key != "rows"}
        if keep_adapters:
            with output.staged(Path(args.out), overwrite=True) as tmp:
                run.trainer.model.save_pretrained(tmp)
                output.write_record(tmp, rec)
        lap(f"train_{cond}")
        scored[cond] = score(scorer(run.trainer.model, tokenizer, cfg.eval_batch_size), spec, meta, cfg.include_path)
        lap(f"score_{cond}")
        base = run.trainer.model.unload()  # detach the adapter: the same base serves the next one
    _LOADED[base_key(cfg)] = base, tokenizer
    return unit_of(cfg, slug, k, spec, subsample_docs(spec, cfg, k), scored, seconds, training)


def classifier_unit(cfg: GridConfig, slug: str, k: int) -> Unit:
    """Fine-tune a classifier on train from the base LM, then from the LM pretrained on the raw texts
    of extra, then on those of test (then, for leak, on test's texts each followed by its class
    name)."""
    from harness.classifier import classify
    from tapt.corpus import raw_texts
    from tapt.raw_text import pretrain

    spec = load_spec(slug, cfg.include_path)
    settings = cfg.for_task(slug)
    docs = subsample_docs(spec, cfg, k)
    unit_seed = cfg.seed + k  # the head's init and the training order: a rerun reproduces the unit
    seconds, training, scored = {}, {}, {}
    for cond in cfg.conditions:
        clock = time.perf_counter()
        with tempfile.TemporaryDirectory() as work:
            backbone = resolve(cfg.base)
            if cond != "base":  # TAPT on the split's texts, never train's; labels only for the planted leak
                split, answers = CONDITIONS[cond]
                texts = raw_texts(docs[split], spec, answers)
                training[f"pretrain_{cond}"] = pretrain(backbone, texts, settings, unit_seed, Path(work))
                backbone = work
            scored[cond], training[f"classify_{cond}"] = classify(
                backbone, docs["train"], docs["test"], len(spec.classes), settings, cfg.eval_batch_size, unit_seed)
        seconds[cond] = time.perf_counter() - clock
        log.info("%s subsample %d: %s done (%.1f s)", slug, k, cond, seconds[cond])
    return unit_of(cfg, slug, k, spec, docs, scored, seconds, training)


def unit_of(cfg: GridConfig, slug: str, k: int, spec, docs, scored: dict, seconds: dict, training: dict) -> Unit:
    """The unit's accuracies, its per-example probabilities, and what made them."""
    accs = {cond: float(df["correct"].mean()) for cond, df in scored.items()} | majority(docs, len(spec.classes))
    probs = pd.concat([df.assign(condition=cond) for cond, df in scored.items()], ignore_index=True)
    settings = cfg.result_settings()
    return Unit(slug, k, accs, probs, {"settings": settings, "settings_hash": fingerprint(settings),
                                       "seconds": seconds, "training": training})


def write_unit(cfg: GridConfig, unit: Unit) -> Path:
    """Record the unit atomically (a rewrite of the same unit replaces it) and rebuild its task's tables."""
    tdir = results.task_dir(Path(cfg.out), cfg.m, cfg.n, cfg.tag, unit.slug)
    results.write_unit(tdir, unit.k, unit.accs, unit.probs, unit.meta)
    results.rebuild(tdir)
    return tdir


def model_dir(cfg: GridConfig) -> Path:
    return Path(cfg.out) / f"m{cfg.m}" / f"n{cfg.n}" / cfg.tag


def stale_units(cfg: GridConfig) -> list[tuple[Path, int, dict]]:
    """Finished units of this config's tasks (any shard) whose recorded settings differ from cfg's."""
    want = cfg.result_settings()
    stale = []
    for slug in cfg.slugs:
        tdir = results.task_dir(Path(cfg.out), cfg.m, cfg.n, cfg.tag, slug)
        for k, unit in results.finished(tdir).items():
            if unit.get("settings") != want:
                stale.append((tdir, k, unit.get("settings", {})))
    return stale


def check_settings(cfg: GridConfig, overwrite: bool) -> None:
    """Refuse to add units to results made with other settings; with `overwrite`, delete those units."""
    stale = stale_units(cfg)
    if not stale:
        return
    if overwrite:
        for tdir, k, _ in stale:
            results.remove_unit(tdir, k)
        for tdir in sorted({tdir for tdir, _, _ in stale}):
            results.rebuild(tdir)
        log.info("--overwrite: removed %d unit(s) made with other settings", len(stale))
        return
    tdir, k, old = stale[0]
    changed = differences(old, cfg.result_settings()) if old else ["no settings recorded (an older tapt-bench)"]
    raise SettingsError(
        f"{model_dir(cfg)} holds {len(stale)} finished unit(s) made with other settings "
        f"(e.g. {tdir.name} subsample {k}):\n  " + "\n  ".join(changed) + "\n"
        "Their numbers would be mixed with this run's. Either write to a new `out`, or pass "
        "--overwrite to delete those units and recompute them with these settings."
    )


def start_log(cfg: GridConfig, shard: tuple[int, int]) -> logging.FileHandler:
    """A log file per run under <model dir>/logs, with what this run does and how long each unit took."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = model_dir(cfg) / "logs" / f"run-{stamp}-shard{shard[0]}of{shard[1]}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    return handler


def write_manifest(cfg: GridConfig, shard: tuple[int, int], started: float, finished: list) -> None:
    from tapt.output import library_versions

    path = model_dir(cfg) / f"manifest-shard{shard[0]}of{shard[1]}.json"
    manifest = {"config": dataclasses.asdict(cfg), "settings_hash": fingerprint(cfg.result_settings()),
                "shard": list(shard), "versions": library_versions(), "seed": cfg.seed,
                "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
                "seconds": time.time() - started, "finished_units": finished}
    results.atomic_write(path, json.dumps(manifest, indent=1).encode())


@contextlib.contextmanager
def output_to(path: Path):
    """Send what the libraries print (the Trainer's step dicts, their progress bars, warnings) to the
    run's log file, at the file-descriptor level; yields the terminal for the grid's own progress bar."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    terminal = os.fdopen(os.dup(2), "w")
    with open(path, "a", buffering=1) as logfile, contextlib.redirect_stdout(logfile), \
            contextlib.redirect_stderr(logfile):  # Python-level writers too (a replaced sys.stdout, say)
        os.dup2(logfile.fileno(), 1)
        os.dup2(logfile.fileno(), 2)
        try:
            yield terminal
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in zip((1, 2), saved):
                os.dup2(copy, fd)
                os.close(copy)
            terminal.close()


def todo(cfg: GridConfig, shard: tuple[int, int]) -> list[tuple[str, int]]:
    """The shard's units that have no finished result yet."""
    return [(slug, k) for slug, k in units(cfg, shard)
            if not results.is_done(results.task_dir(Path(cfg.out), cfg.m, cfg.n, cfg.tag, slug), k)]


def run(cfg: GridConfig, shard: tuple[int, int] = (0, 1), keep_adapters: bool = False,
        overwrite: bool = False, execute=None) -> list[Path]:
    """Run the shard's unfinished units; returns the task dirs it wrote. Safe to kill and rerun.

    `execute(cfg, units, keep_adapters)` yields finished Units in any order (default: one by one in this
    process; harness/ray_grid.py: as Ray tasks). The terminal shows one progress bar; everything else
    goes to the run's log file."""
    from tqdm import tqdm

    check_settings(cfg, overwrite)  # before anything is written
    pending = todo(cfg, shard)
    handler = start_log(cfg, shard)
    started, finished, touched = time.time(), [], []
    log.info("shard %s/%s: %d units to run of %d; base %s", *shard, len(pending), len(units(cfg, shard)), cfg.base)
    write_manifest(cfg, shard, started, finished)
    try:
        with output_to(Path(handler.baseFilename)) as terminal, \
                tqdm(total=len(pending), desc=f"m={cfg.m} n={cfg.n} units", unit="unit", file=terminal) as bar:
            for unit in (execute or in_process)(cfg, pending, keep_adapters):
                touched.append(write_unit(cfg, unit))
                log.info("%s subsample %d: %s (%.0f s)", unit.slug, unit.k,
                         " ".join(f"{c} {unit.accs[c]:.3f}" for c in cfg.conditions), sum(unit.meta["seconds"].values()))
                finished.append([unit.slug, unit.k])
                write_manifest(cfg, shard, started, finished)
                bar.update()
    finally:
        log.removeHandler(handler)
        handler.close()
    print(f"log: {handler.baseFilename}")
    return sorted(set(touched))


def in_process(cfg: GridConfig, pending: list[tuple[str, int]], keep_adapters: bool):
    """The units one after another in this process."""
    for slug, k in pending:
        log.info("%s subsample %d: start", slug, k)
        yield compute_unit(cfg, slug, k, keep_adapters)
