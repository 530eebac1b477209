"""Loading a plug-in named by file or module (`path/to/file.py`, `package.module`) or installed as an
entry point, the one loader for methods, detectors, statistics and scores. Naming a file runs its
top-level code once per process, as installing a pytest plugin does."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import numbers
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from harness.core.plumbing.errors import UserError, named

T = TypeVar("T")


def cannot_import(target: str, module: str, err: Exception) -> str:
    """Why `target` (whose module part is `module`) did not import, and the fix."""
    by_path = module.endswith(".py") or Path(module).is_dir()
    fix = "check the path" if by_path else "put its folder on PYTHONPATH"
    return f"{target!r} cannot be imported ({named(err)}); {fix}"


def own_import_failed(module: str, err: ImportError) -> bool:
    """Whether the plug-in was found and an import inside it failed (a package it needs, say), rather
    than the plug-in itself not being found."""
    if module.endswith(".py"):
        return Path(module).is_file()
    missing = getattr(err, "name", None)
    return missing is not None and not (module == missing or module.startswith(missing + "."))


def failed_loading(target: str, err: BaseException) -> str:
    """What a plug-in file's own code did as it loaded (a syntax error, a raise), and the fix."""

    if isinstance(err, UserError) and str(err).endswith("fix that file"):  # a check named the file already
        return f"{target!r} failed as it loaded: {err}"
    where = f" (line {err.lineno})" if isinstance(err, SyntaxError) else ""
    return f"{target!r} failed as it loaded{where}: {named(err)}; fix that file"


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
    if Path(module).is_dir():  # a folder is no module: name a file in it
        raise ImportError(f"{module} is a folder; name a .py file in it")
    if not module.endswith(".py"):
        return importlib.import_module(module)
    return _load_file(Path(module).resolve())


def only_beside(target: str, folder: Path) -> str | None:
    """Where plug-in `target` names a relative file that the folder the command starts from lacks but
    `folder` (a config's) holds: why it will not load, and the two fixes; else None."""
    file = target.rsplit(":", 1)[0] if ":" in target else ""
    if not file.endswith(".py") or Path(file).is_absolute() or Path(file).exists():
        return None
    there = folder / file
    if not there.is_file():
        return None
    return (
        f"{target!r}: no {file} in the folder the command starts from ({Path.cwd()}), but the "
        f"config's folder holds one ({there}): a plug-in's file resolves against the folder the "
        "command starts from, as `out` does (data_dir and include_path resolve against the config's); "
        f"start from {folder}, or name it as {there}:{target.rsplit(':', 1)[1]}"
    )


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
    statistic): one SettingsError naming `flag` where one cannot be imported, fails as it runs, or
    registers nothing (`count()` is the registry's size; `fix` says how to register)."""
    from harness.core.plumbing.errors import SettingsError

    for target in targets:
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

    if getattr(fn, "__module__", "").startswith(OURS):
        return fn(*args)
    try:
        return fn(*args)
    except (KeyboardInterrupt, SystemExit, UserError):
        raise
    except Exception as err:
        raise UserError(f"{kind} {name!r} ({where(fn)}) failed: {named(err)}; fix that file") from None


def real(kind: str, name: str, fn, value, low: float | None = None, high: float | None = None) -> float:
    """A plug-in's number checked: a real scalar, finite, within [low, high] where given; else one line
    naming the plug-in's file and what it returned. A built-in's value is taken as it is (a NaN where its
    test has nothing to read)."""

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


def from_table(table: dict[str, str], name: str):
    """The built-in a kind's lazy table (name -> `module:NAME`) names, its module imported alone; None
    where the table has no such name."""
    if name not in table:
        return None
    module, _, attr = table[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def resolved(name: str) -> str:
    """A plug-in's name as one key: `file.py:attr` with the file's absolute path (a relative path names
    another file from another folder); any other name as it is."""
    module, colon, attr = name.rpartition(":")
    return f"{Path(module).resolve()}:{attr}" if colon and module.endswith(".py") else name


REGISTRIES: dict[str, Registry] = {}  # kind -> its registry, as each is made (harness.api.register reads it)


class Registry(Mapping[str, T]):
    """One kind of plug-in (a row of plugin_kinds.KINDS), registered and found one way, with
    its errors in the same words for every kind. It reads as a mapping of name -> item: the built-ins
    (`builtins()`), those registered, and those of the installed entry points of the kind's group (each
    names its value, `module:NAME`, loaded on the first read).
    - `register(item)` adds one under its name (refused where the name is taken by another, the item is not
      of the kind's type, or `validate` refuses it);
    - `find(name)` gives the item of that name (`named(name)`, where given, finds a built-in without
      loading the others), else an installed entry point's by its name, else the one
      `package.module:attr` or `path/to/file.py:attr` names (loaded and passed through `check`, which may
      refuse it or say where it came from, once per process: the same name finds the same item after);
    - `load(target)` adds what a command-line flag names: the value, or a file or module that registers
      values as it loads.
    Written by hand: Python's entry points find installed plug-ins, not files or built-ins."""

    def __init__(
        self,
        kind: str,
        of: type,
        builtins: Callable[[], dict[str, T]] = dict,
        key: Callable[[Any], str] = lambda item: item.name,
        check: Callable[[Any, str], Any] | None = None,
        named: Callable[[str], T | None] = lambda name: None,
        validate: Callable[[T], None] | None = None,
    ) -> None:
        from harness.core.plumbing.plugin_kinds import BY_NAME

        row = BY_NAME[kind]
        if row.type != f"{of.__module__}:{of.__qualname__}":
            raise TypeError(f"plugin_kinds.KINDS's {kind} row names {row.type}; its registry holds {of}")
        self.kind, self.of, self.group, self.example = kind, of, row.group, row.example
        self.builtins, self.key, self.check, self.named, self.validate = builtins, key, check, named, validate
        self._items: dict[str, T] = {}
        self._found: dict[str, T] = {}  # an entry point's name or a target -> its checked item
        self._installed = False
        REGISTRIES[kind] = self

    def register(self, item: T) -> T:
        if not isinstance(item, self.of):
            raise PluginError(f"{self.kind} {item!r} is a {type(item).__name__}, not a {self.type_name}")
        if self.validate is not None:
            self.validate(item)
        name = self.key(item)
        taken = self.held(name)
        if taken is not None and taken is not item and taken != item:
            raise PluginError(f"a {self.kind} named {name!r} is registered already; choose another name")
        self._items[name] = item
        return item

    @property
    def type_name(self) -> str:
        return f"{self.of.__module__}.{self.of.__qualname__}"

    def registered(self) -> list[str]:
        """The names registered so far, the installed entry points not read."""
        return list(self._items)

    def held(self, name: str) -> T | None:
        """The item of that name registered so far (a built-in included), the installed entry points not
        read (a module that registers as it loads may be one of them)."""
        return self._items.get(name) or self.builtins().get(name)

    def pop(self, name: str, default=None):
        """Take a registered item out (a test's plug-in, say)."""
        return self._items.pop(name, default)

    def installed(self) -> dict[str, str]:
        """The kind's installed entry points: name -> `module:NAME`."""
        from importlib.metadata import entry_points

        return {e.name: e.value for e in entry_points(group=self.group)}

    def entry_point(self, name: str, value: str) -> T:
        """The value an installed entry point names, of this kind; else one line naming the entry point and
        the fix."""
        where = f"entry point {name} = {value} (group {self.group})"
        module, colon, attr = value.partition(":")
        if not (colon and module and attr):
            raise PluginError(f"{where} names a module, not a {self.kind}: name the value, as {module}:NAME")
        try:
            found = load_attr(value, self.example)
        except ValueError as err:
            raise PluginError(f"{where}: {err}") from None
        if not isinstance(found, self.of):
            raise PluginError(f"{where} names a {type(found).__name__}, not a {self.type_name}: name one")
        return found

    def _all(self) -> dict[str, T]:
        if not self._installed:
            self._installed = True
            for name, value in self.installed().items():
                item = self.entry_point(name, value)
                if self.check is not None:
                    item = self.check(item, value) or item
                self._found[value] = item
                self.register(item)
        return self.builtins() | self._items

    def __getitem__(self, name: str) -> T:
        return self._all()[name]

    def __iter__(self):
        return iter(list(self._all()))

    def __len__(self) -> int:
        return len(self._all())

    def find(self, name: str) -> T:
        found = self._items.get(name) or self.named(name)
        if found is not None:
            return found
        every = self._all()
        if name in every:
            return every[name]
        key = resolved(name)
        if key in self._found:
            return self._found[key]
        installed = self.installed()
        target = installed.get(name, name)
        if ":" not in target:
            raise PluginError(
                f"no {self.kind} {name!r}: the {self.kind}s are {', '.join(every)}, or your own as "
                f"`package.module:attr` or `{self.example}`"
            )
        value = self.entry_point(name, target) if name in installed else self.loaded(target)
        if self.check is not None:
            value = self.check(value, target) or value
        self._found[key] = value
        return value

    def loaded(self, target: str) -> T:
        try:
            value = load_attr(target, self.example)
        except ValueError as err:
            raise PluginError(str(err)) from None
        if not isinstance(value, self.of):
            raise PluginError(f"{target!r} is a {type(value).__name__}, not a {self.type_name}")
        return value

    def load(self, target: str, flag: str, fix: str, add: Callable[[T, str], T] | None = None) -> None:
        """Add what a command-line flag names: `path/to/file.py:NAME` or `module:NAME`, the item itself
        (added by `add(item, NAME)`, else `register`), as every kind is named; or a file or module alone
        that registers this kind's items as it loads (load_registering)."""
        from harness.core.plumbing.errors import SettingsError

        module, colon, attr = target.rpartition(":")
        if not (colon and module and attr and not {"/", "\\"} & set(attr)):
            load_registering([target], flag, lambda: len(self._items), self.kind, fix)
            return
        try:  # found as `find` finds any kind's `file.py:NAME`, then added under its name
            value = self.find(target)
            add(value, attr) if add else self.register(value)  # the same item registered by its file: kept
        except PluginError as err:
            raise SettingsError.of(flag, str(err)) from None


class PluginError(UserError):
    """A plug-in that cannot be found, loaded or registered: says which and what to fix (one line, no
    traceback, as every UserError)."""
