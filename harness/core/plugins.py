"""Loading a plug-in named by file or module (`path/to/file.py`, `package.module`), the one loader for
methods, detectors, statistics and scores. Naming a file runs its top-level code once per process, as
installing a pytest plugin does."""

from __future__ import annotations

import importlib
import importlib.util
from functools import cache
from pathlib import Path


def load_module(module: str):
    """An importable module by name, or a Python file by path (`my_method.py`, run once per process)."""
    if not module.endswith(".py"):
        return importlib.import_module(module)
    return _load_file(Path(module).resolve())


@cache
def _load_file(path: Path):
    if not path.is_file():
        raise ImportError(f"no such file {path}")
    spec = importlib.util.spec_from_file_location(f"tapt_bench_user_{path.stem}", path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded
