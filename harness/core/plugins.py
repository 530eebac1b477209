"""Loading a plug-in named by file or module (`path/to/file.py`, `package.module`) or installed as an
entry point, the one loader for methods, detectors, statistics and scores. Naming a file runs its
top-level code once per process, as installing a pytest plugin does."""

from __future__ import annotations

import importlib
import importlib.util
from functools import cache
from pathlib import Path


def cannot_import(target: str, module: str, err: Exception) -> str:
    """Why `target` (whose module part is `module`) did not import, and the fix."""
    fix = "check the path" if module.endswith(".py") else "put its folder on PYTHONPATH"
    return f"{target!r} cannot be imported ({type(err).__name__}: {err}); {fix}"


def load_entry_points(group: str) -> list[str]:
    """Import the module of every installed entry point of `group` (each registers what it defines as
    it loads); their names."""
    from importlib.metadata import entry_points

    names = []
    for point in entry_points(group=group):
        importlib.import_module(point.value.split(":")[0])
        names.append(point.name)
    return names


def load_attr(target: str, example: str):
    """What `target` names, `path/to/file.py:attr` or `package.module:attr`. Raises ValueError that says
    what to fix, as `example` shows a target."""
    module, _, attr = target.rpartition(":")
    if not module or not attr:
        raise ValueError(f"{target!r} must name a module or file and an attribute, as `{example}`")
    try:
        return getattr(load_module(module), attr)
    except (ImportError, AttributeError, OSError) as err:
        raise ValueError(cannot_import(target, module, err)) from None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # the file's own code failed as it ran (a syntax error, a raise)
        where = f" (line {err.lineno})" if isinstance(err, SyntaxError) else ""
        raise ValueError(
            f"{target!r} failed as it loaded{where}: {type(err).__name__}: {err}; fix that file"
        ) from None


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
