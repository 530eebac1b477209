"""What a unit read, by content: the rows its draw gave (their text and gold answers), its task's
definition, and the base's weight files. A unit records them (`inputs`); a run into a folder whose finished
units read other content (a data file replaced, a task YAML edited, other weights under the same name) is
refused, naming what changed, as a change of settings is: the numbers would be pooled across inputs that
differ while every setting matches."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

import pandas as pd

from harness.core.engine import models
from harness.core.plumbing.settings import fingerprint
from harness.tasks.protocol import Spec

WEIGHTS = ("*.safetensors", "*.bin", "*.gguf", "*.pt")  # a model folder's weight files
READ = ("train", "extra", "test")  # the splits a unit reads


def rows(docs: dict[str, pd.DataFrame]) -> str:
    """The drawn documents' rows, texts and gold answers, split by split."""
    digest = hashlib.sha256()
    for split in READ:
        frame = docs[split]
        gold = frame["answer"] if "answer" in frame else frame.get("label", pd.Series([None] * len(frame)))
        part = [[int(r), str(t), str(g)] for r, t, g in zip(frame["row"], frame["text"], gold)]
        digest.update(json.dumps([split, part]).encode())
    return digest.hexdigest()[:16]


def pool(spec: Spec, sample) -> str:
    """The task's whole pool of documents, in its order (its data file's rows, the draw's input): shards
    of one run that read two versions of a data file differ here, while each unit's own rows differ
    between subsamples anyway."""
    frame = spec.pool_docs(sample)
    digest = hashlib.sha256(json.dumps(list(map(str, frame.columns))).encode())
    digest.update(pd.util.hash_pandas_object(frame.astype(str), index=True).to_numpy().tobytes())
    return digest.hexdigest()[:16]


def pool_facts(spec: Spec, sample) -> tuple[str, float]:
    """The task's pool hash and majority share: what every unit of a task records alike, read once a run."""
    return pool(spec, sample), spec.pool_majority(sample)


def task(spec: Spec, include_path: tuple[str, ...] | list[str] = ()) -> str:
    """The task's definition: a tapt_* task's merged YAML (its includes in), an lm-eval task's config."""
    from harness.tasks.spec import TaskSpec, load_task_config, task_files

    if isinstance(spec, TaskSpec):
        path = task_files(tuple(include_path)).get(spec.slug)
        if path is not None:
            return fingerprint(load_task_config(path))
        return fingerprint({k: str(v) for k, v in vars(spec).items()})
    config = getattr(getattr(spec, "task", None), "config", None)
    shown = config.to_dict() if hasattr(config, "to_dict") else vars(spec)
    return fingerprint(json.loads(json.dumps(shown, default=str)))


@functools.cache
def _weights(folder: str, stamp: tuple) -> str | None:
    digest = hashlib.sha256()
    for name, _size, _mtime in stamp:
        with open(Path(folder) / name, "rb") as f:
            digest.update(name.encode())
            digest.update(hashlib.file_digest(f, "sha256").digest())
    return digest.hexdigest()[:16]


def base(name: str) -> str | None:
    """The base's weight files by content (computed once a process for files unchanged on disk); None for
    a hub id not on this disk (its revision is the hub's)."""
    folder = Path(models.resolve(name))
    if not folder.is_dir():
        return None
    files = sorted(p for pattern in WEIGHTS for p in folder.glob(pattern) if p.is_file())
    stamp = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    return _weights(str(folder), stamp) if stamp else None


def of_unit(
    spec: Spec, docs: dict[str, pd.DataFrame], weights: str | None, sample, pool_hash: str | None = None
) -> dict:
    """A unit's inputs, as its record keeps them (`weights`: the run's base(), hashed once a run;
    `pool_hash`: the task's pool(), where the run read it once)."""
    return {
        "rows": rows(docs),
        "pool": pool_hash or pool(spec, sample),
        "task": task(spec, sample.include_path),
        "base": weights,
    }


SHARED = ("pool", "task", "base")  # what every unit of a task and model reads alike
WHAT = {
    "rows": "the rows its draw gives (the task's data file was replaced or edited)",
    "pool": "the task's documents (its data file was replaced or edited)",
    "task": "its task's definition (the task YAML was edited)",
    "base": "the base's weight files (other weights under the same name)",
}


def changed(planned, finished: dict[str, dict[int, dict]]) -> list[tuple[str, int, str]]:
    """The finished units (`finished`: task -> subsample -> record) that read other content than this run
    would, each with what changed: their task's definition, the base's weights, the rows of their draw. A
    record without inputs (written before they were recorded) is not read."""
    from harness.grid.unit.unit_plan import UnitKey
    from harness.tasks.protocol import find_spec

    cfg, out = planned.config, []
    for slug, units in finished.items():
        recorded = {k: r["inputs"] for k, r in units.items() if isinstance(r.get("inputs"), dict)}
        if not recorded:
            continue
        spec = find_spec(slug, cfg.sample.include_path)
        now = {"task": task(spec, cfg.sample.include_path), "base": planned.weights}
        for k, then in sorted(recorded.items()):
            found = [key for key, value in now.items() if then.get(key) not in (None, value)]
            if not found and then.get("rows") is not None:
                drawn = planned.unit(UnitKey(slug, k), spec).docs()
                found = [] if rows(drawn) == then["rows"] else ["rows"]
            if found:
                out.append((slug, k, "; ".join(WHAT[key] for key in found)))
    return out
