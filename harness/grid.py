"""The experiment grid: for each (task, subsample) unit, score base, TAPT on extra, TAPT on test."""

from __future__ import annotations

import dataclasses
import json
import logging
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from harness import results
from harness.data import load_pool
from harness.docs import subsample_docs
from harness.models import resolve
from harness.score import score, scorer
from harness.spec import TaskError, all_slugs, load_spec
from harness.subsample import draw

log = logging.getLogger("tapt_bench.grid")


@dataclass
class GridConfig:
    """One experiment: a base model, tasks and subsample sizes (see configs/*.yaml)."""

    base: str
    tasks: list[str] | str = "all"
    m: int = 100
    n: int = 100
    subsamples: int = 20
    packing: bool = False
    epochs: float = 1.0
    quantize: str = "4bit"
    lr: float = 2e-4
    max_length: int | None = None
    train_batch_size: int = 8
    eval_batch_size: int = 8
    data_dir: str | None = None
    out: str = "results"
    model_tag: str | None = None  # folder name of the model; default: the base's last path part
    seed: int = 0
    notes: dict[str, Any] = field(default_factory=dict)  # free-form, kept in the manifest

    @property
    def tag(self) -> str:
        return self.model_tag or Path(self.base.rstrip("/")).name

    @property
    def slugs(self) -> list[str]:
        return all_slugs() if self.tasks == "all" else [t.removeprefix("tapt_") for t in self.tasks]


def load_config(path: str | Path) -> GridConfig:
    """Read and check a grid config: known keys, known tasks, pools large enough for m + 2n."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as err:
        raise TaskError(f"{path}: cannot read the config ({err})") from err
    known = {f.name for f in dataclasses.fields(GridConfig)}
    if not isinstance(raw, dict) or "base" not in raw:
        raise TaskError(f"{path}: a grid config is a mapping with at least `base`")
    unknown = sorted(set(raw) - known)
    if unknown:
        raise TaskError(f"{path}: unknown key(s) {unknown}; allowed: {sorted(known)}")
    cfg = GridConfig(**raw)
    for slug in cfg.slugs:
        try:
            labels = load_pool(load_spec(slug), cfg.data_dir)["label"].to_numpy()
            draw(labels, 0, cfg.m, cfg.n, cfg.seed)
        except TaskError as err:
            raise TaskError(f"{path}: task {slug!r}: {err}") from err
    return cfg


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


def run_unit(cfg: GridConfig, base, tokenizer, slug: str, k: int, tdir: Path, keep_adapters: bool):
    """Score base, then train and score one adapter per TAPT split, detaching each after use.

    Returns the (clean) base model and the unit's accuracies.
    """
    from tapt import record
    from tapt.adapter import AdapterArgs, prepare, record_of

    spec = load_spec(slug)
    meta = {"data_dir": cfg.data_dir, "subsample": k, "m": cfg.m, "n": cfg.n, "seed": cfg.seed, "split": "test"}
    seconds, training = {}, {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        seconds[name], clock = time.perf_counter() - clock, time.perf_counter()

    scored = {"base": score(scorer(base, tokenizer, cfg.eval_batch_size), spec, meta)}
    lap("score_base")
    for split in ("extra", "test"):
        args = AdapterArgs(task=slug, split=split, base=cfg.base, out=tdir / "adapters" / f"{k}_{split}",
                           subsample=k, n=cfg.n, m=cfg.m, seed=cfg.seed, data_dir=cfg.data_dir,
                           packing=cfg.packing, epochs=cfg.epochs, quantize=cfg.quantize, lr=cfg.lr,
                           batch_size=cfg.train_batch_size, max_length=cfg.max_length)
        with tempfile.TemporaryDirectory() as work:  # the Trainer's scratch dir
            run = prepare(args, Path(work), model=base)
            run.trainer.train()
        rec = record_of(args, run)
        training[split] = {key: v for key, v in rec.items() if key != "rows"}
        if keep_adapters:
            with record.staged(args.out, overwrite=True) as tmp:
                run.trainer.model.save_pretrained(tmp)
                record.write_record(tmp, rec)
        lap(f"train_{split}")
        scored[split] = score(scorer(run.trainer.model, tokenizer, cfg.eval_batch_size), spec, meta)
        lap(f"score_{split}")
        base = run.trainer.model.unload()  # detach the adapter: the same base serves the next one
    docs = subsample_docs(spec, cfg.data_dir, k, cfg.m, cfg.n, cfg.seed)
    accs = {cond: float(df["correct"].mean()) for cond, df in scored.items()} | majority(docs, len(spec.classes))
    probs = pd.concat([df.assign(condition=cond) for cond, df in scored.items()], ignore_index=True)
    results.write_unit(tdir, k, accs, probs, {"seconds": seconds, "training": training})
    results.rebuild(tdir)
    return base, accs


def model_dir(cfg: GridConfig) -> Path:
    return Path(cfg.out) / f"m{cfg.m}" / f"n{cfg.n}" / cfg.tag


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
    from tapt.record import library_versions

    path = model_dir(cfg) / f"manifest-shard{shard[0]}of{shard[1]}.json"
    manifest = {"config": dataclasses.asdict(cfg), "shard": list(shard), "versions": library_versions(),
                "seed": cfg.seed, "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
                "seconds": time.time() - started, "finished_units": finished}
    results.atomic_write(path, json.dumps(manifest, indent=1).encode())


def run(cfg: GridConfig, shard: tuple[int, int] = (0, 1), keep_adapters: bool = False) -> list[Path]:
    """Run the shard's unfinished units; returns the task dirs it wrote. Safe to kill and rerun."""
    from tqdm import tqdm
    from transformers import AutoTokenizer

    from tapt.adapter import load_base

    cfg.base = resolve(cfg.base)
    todo = [(slug, k) for slug, k in units(cfg, shard)
            if not results.is_done(results.task_dir(Path(cfg.out), cfg.m, cfg.n, cfg.tag, slug), k)]
    handler = start_log(cfg, shard)
    started, finished, touched = time.time(), [], []
    log.info("shard %s/%s: %d units to run of %d; base %s", *shard, len(todo), len(units(cfg, shard)), cfg.base)
    write_manifest(cfg, shard, started, finished)
    try:
        if todo:
            tokenizer = AutoTokenizer.from_pretrained(cfg.base)
            base, _ = load_base(cfg.base, cfg.quantize, fallback_lora=False)
        for slug, k in tqdm(todo, desc="grid units", unit="unit"):
            tdir = results.task_dir(Path(cfg.out), cfg.m, cfg.n, cfg.tag, slug)
            unit_start = time.time()
            base, accs = run_unit(cfg, base, tokenizer, slug, k, tdir, keep_adapters)
            log.info("%s subsample %d: base %.3f extra %.3f test %.3f (%.0f s)", slug, k,
                     accs["base"], accs["extra"], accs["test"], time.time() - unit_start)
            finished.append([slug, k])
            touched.append(tdir)
            write_manifest(cfg, shard, started, finished)
    finally:
        log.removeHandler(handler)
        handler.close()
    print(f"log: {handler.baseFilename}")
    return sorted(set(touched))
