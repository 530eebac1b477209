"""Loading a plug-in named by file or module (`path/to/file.py`, `package.module`) or installed as an
entry point, the one loader for methods, detectors, statistics and scores. Naming a file runs its
top-level code once per process, as installing a pytest plugin does."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import numbers
from functools import cache
from pathlib import Path


def cannot_import(target: str, module: str, err: Exception) -> str:
    """Why `target` (whose module part is `module`) did not import, and the fix."""
    fix = "check the path" if module.endswith(".py") else "put its folder on PYTHONPATH"
    return f"{target!r} cannot be imported ({type(err).__name__}: {err}); {fix}"


def own_import_failed(module: str, err: ImportError) -> bool:
    """Whether the plug-in was found and an import inside it failed (a package it needs, say), rather
    than the plug-in itself not being found."""
    if module.endswith(".py"):
        return Path(module).is_file()
    missing = getattr(err, "name", None)
    return missing is not None and not (module == missing or module.startswith(missing + "."))


def failed_loading(target: str, err: BaseException) -> str:
    """What a plug-in file's own code did as it loaded (a syntax error, a raise), and the fix."""
    where = f" (line {err.lineno})" if isinstance(err, SyntaxError) else ""
    return f"{target!r} failed as it loaded{where}: {type(err).__name__}: {err}; fix that file"


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
        if isinstance(err, ImportError) and own_import_failed(module, err):
            raise ValueError(failed_loading(target, err)) from None
        raise ValueError(cannot_import(target, module, err)) from None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # the file's own code failed as it ran (a syntax error, a raise)
        raise ValueError(failed_loading(target, err)) from None


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


_LOADED: set[str] = set()  # files of registering plug-ins loaded in this process (each runs once)


def load_registering(targets: list[str], flag: str, count, what: str, fix: str) -> None:
    """Load each file or module of `targets`, which registers `what` as it loads (a detector, a
    statistic): one SettingsError naming `flag` where one is `file.py:ATTR`, cannot be imported, fails
    as it runs, or registers nothing (`count()` is the registry's size; `fix` says how to register)."""
    from harness.core.errors import SettingsError

    for target in targets:
        module, colon, attr = target.rpartition(":")
        if colon and attr and not {"/", "\\"} & set(attr):  # `file.py:ATTR`: how a method is named
            problem = (
                f"names {target!r}, a file and an attribute; a {what} file registers as it loads: pass the "
                f"file or module alone ({module})"
            )
            raise SettingsError.of(flag, problem)
        before = count()
        try:
            load_module(target)
        except (ImportError, OSError) as err:
            raise SettingsError.of(flag, cannot_import(target, target, err)) from None
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:  # the file's own code: a syntax error, a raise, a bad register call
            raise SettingsError.of(flag, failed_loading(target, err)) from None
        if count() == before and target not in _LOADED:
            raise SettingsError.of(flag, f"{target!r} registers no {what}; {fix}")
        _LOADED.add(target)


def source_sha256(target: str) -> str | None:
    """The sha256 of the file that defines a plug-in named `path/to/file.py:attr` or `package.module:attr`
    (its module's own file; what that file imports is not covered); None for a built-in (the product
    commit covers it) or where the file cannot be found."""
    import hashlib

    module = target.rpartition(":")[0] or target
    if module.endswith(".py"):
        path = Path(module)
    else:
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            return None
        path = Path(found.origin) if found and found.origin else None
    if path is None or not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


def where(fn) -> str:
    """The file (else the module) a plug-in's function is defined in, for its errors."""
    try:
        return inspect.getsourcefile(fn) or fn.__module__
    except TypeError:
        return getattr(fn, "__module__", repr(fn))


OURS = ("harness.", "contamination.", "tapt.", "tasks_yaml.")  # the package's modules: not plug-ins


def called(kind: str, name: str, fn, *args):
    """`fn(*args)`, a plug-in's function; what it raises comes back as one line naming its file (a
    built-in's error is the package's bug, raised as it is)."""
    from harness.core.errors import UserError

    if getattr(fn, "__module__", "").startswith(OURS):
        return fn(*args)
    try:
        return fn(*args)
    except (KeyboardInterrupt, SystemExit, UserError):
        raise
    except Exception as err:
        raise UserError(
            f"{kind} {name!r} ({where(fn)}) failed: {type(err).__name__}: {err}; fix that file"
        ) from None


def real(kind: str, name: str, fn, value, low: float | None = None, high: float | None = None) -> float:
    """A plug-in's number checked: a real scalar, finite, within [low, high] where given; else one line
    naming the plug-in's file and what it returned. A built-in's value is taken as it is (a NaN where its
    test has nothing to read)."""
    from harness.core.errors import UserError

    if getattr(fn, "__module__", "").startswith(OURS):
        return float(value)
    scalar = getattr(value, "ndim", 0) == 0 and not isinstance(value, (bool, str, bytes))
    ok = scalar and isinstance(getattr(value, "item", lambda: value)(), numbers.Real)
    number = float(value) if ok else math.nan
    if ok and math.isfinite(number) and (low is None or number >= low) and (high is None or number <= high):
        return number
    bounds = f" in [{low:g}, {high:g}]" if low is not None and high is not None else ""
    raise UserError(
        f"{kind} {name!r} ({where(fn)}) returned {value!r} ({type(value).__name__}); it must return a finite "
        f"number{bounds}: fix that file"
    )
