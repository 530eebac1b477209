"""Stage settings as dataclasses: one declaration gives the defaults, the checks, the CLI flags and
the config keys of a setting.

Each stage (subsample, prompt TAPT, raw text TAPT, contamination, grid) declares its settings once
as a `Settings` dataclass (help text in `field(metadata={"help": ...})`); harness.core.plumbing.flags turns
the fields into CLI flags, and `from_mapping` reads config keys into the same classes. Every instance
checks its own types and bounds on construction, so a bad value gets the same clear error from a flag,
a config file or Python, before anything is written.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import os
import re
import types
import typing
from pathlib import Path
from typing import Any, ClassVar, Literal, Union

from harness.core.plumbing.errors import SettingsError, UserError

# a number in exponent form that YAML 1.1 (PyYAML) leaves a string: 2e-3, 1E4, -5e+2
YAML11_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")
NEVER, WHEN_SET = "never", "when set"  # when a results record holds a key (harness.core.plumbing.sections)


def since(first: Any) -> tuple[str, Any]:
    """A RECORD rule: the key is recorded only when its value is not `first`, the value every result made
    before the key existed ran with (its default may since have changed)."""
    return ("when not", first)


def option(default: Any = dataclasses.MISSING, help: str = "", **kw) -> Any:
    """A settings field with its help text (shown by `--help`)."""
    if isinstance(default, (list, dict)):
        kw["default_factory"], default = (lambda d=default: type(d)(d)), dataclasses.MISSING
    return dataclasses.field(default=default, metadata={"help": help}, **kw)


def merged(cls: type, name: str) -> dict:
    """A ClassVar dict (or tuple) merged over the class and its bases: a subclass adds entries."""
    out: dict = {}
    for klass in reversed(cls.__mro__):
        entries = vars(klass).get(name, {})
        out.update(entries if isinstance(entries, dict) else dict.fromkeys(entries))
    return out


def describe(tp: Any) -> str:
    """The expected type in words, for error messages."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(describe(a) for a in args)
    if origin is list:
        return f"a list of {describe(args[0]).removeprefix('a ').removeprefix('an ')}s"
    names = {
        bool: "true or false",
        int: "an integer",
        float: "a number",
        str: "a string",
        type(None): "null (unset)",
        dict: "a mapping",
    }
    return names.get(tp, getattr(tp, "__name__", str(tp)))


def conform(value: Any, tp: Any) -> tuple[bool, Any]:
    """(ok, value converted where lossless: an int where a float is expected)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return True, value
    if origin in (Union, types.UnionType):
        for arg in args:
            ok, converted = conform(value, arg)
            if ok:
                return True, converted
        return False, value
    if origin is Literal:
        return value in args, value
    if origin is list:
        if not isinstance(value, list):
            return False, value
        items = [conform(v, args[0]) for v in value]
        return all(ok for ok, _ in items), [v for _, v in items]
    if tp is type(None):
        return value is None, value
    if tp is bool:
        return isinstance(value, bool), value
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if tp is float:
        if isinstance(value, str) and YAML11_FLOAT.fullmatch(value.strip()):
            return True, float(value)  # `2e-3`: YAML 1.1 reads an exponent without a dot as a string
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return ok, float(value) if ok else value
    if tp is str:  # a path object is as good as its string
        ok = isinstance(value, (str, os.PathLike))
        return ok, str(value) if ok else value
    if origin is dict or tp is dict:
        return isinstance(value, dict), value
    return isinstance(value, tp), value


@dataclasses.dataclass(kw_only=True)
class Settings:
    """Base of every stage's settings: checks each field against its annotation and its bounds.

    Subclasses declare bounds in `MINIMUM` ({field: smallest allowed value}), `ABOVE` and `BELOW` (strict
    bounds), the fields that are paths in `PATHS` (resolved against a config file's folder when read
    from one), and when a results record holds a field in `RECORD` ({field: NEVER or WHEN_SET}) and
    `PARTS` ({field: the optional part of a run it configures}); see harness.core.plumbing.sections.recorded.
    """

    MINIMUM: ClassVar[dict[str, float]] = {}
    ABOVE: ClassVar[dict[str, float]] = {}  # strict lower bounds
    BELOW: ClassVar[dict[str, float]] = {}  # strict upper bounds
    PATHS: ClassVar[tuple[str, ...]] = ()
    HOME: ClassVar[tuple[str, ...]] = ()  # further fields that are paths: `~` expanded, as in PATHS
    RECORD: ClassVar[dict[str, Any]] = {}
    PARTS: ClassVar[dict[str, str]] = {}

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        bounds = [
            (merged(type(self), "MINIMUM"), lambda v, b: v >= b, "at least"),
            (merged(type(self), "ABOVE"), lambda v, b: v > b, "above"),
            (merged(type(self), "BELOW"), lambda v, b: v < b, "below"),
        ]
        paths = {*merged(type(self), "PATHS"), *merged(type(self), "HOME")}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in paths:
                value = expanded(value)
                if isinstance(value, str) and not value.strip():  # '' would mean the current folder
                    raise SettingsError.of(f.name, "is empty: name a path")
            ok, converted = conform(value, hints[f.name])
            if not ok:
                problem = f"must be {describe(hints[f.name])}, got {value!r}"
                raise SettingsError.of(f.name, problem)
            numbers = converted if isinstance(converted, list) else [converted]
            if any(isinstance(x, float) and not math.isfinite(x) for x in numbers):
                raise SettingsError.of(f.name, f"must be a finite number, got {value!r}")
            setattr(self, f.name, converted)
            for limits, holds, words in bounds:
                bound = limits.get(f.name)
                if bound is not None and converted is not None and not holds(converted, bound):
                    raise SettingsError.of(f.name, f"must be {words} {bound}, got {converted!r}")
        self.check()

    def check(self) -> None:
        """Checks across fields; subclasses extend (calling super().check())."""

    def __setattr__(self, key: str, value: Any) -> None:
        if self.__dict__.get("read_only"):  # a section of settings made of sections (sections.py)
            raise AttributeError(
                f"{type(self).__name__} is a read-only section: make a changed copy with replace({key}=...)"
            )
        object.__setattr__(self, key, value)


S = typing.TypeVar("S", bound=Settings)


def pick(settings: Any, cls: type) -> dict[str, Any]:
    """The values of `cls`'s fields held by a wider settings object, or one made of sections (to build a
    narrower one)."""
    if hasattr(settings, "SECTIONS"):  # its keys, flat
        settings = types.SimpleNamespace(**settings.keys())
    return {f.name: getattr(settings, f.name) for f in fields_of(cls)}


def fields_of(cls: type) -> list[dataclasses.Field]:
    """A settings class's fields, or every section's of settings made of sections."""
    return cls.fields() if hasattr(cls, "SECTIONS") else list(dataclasses.fields(cls))


def field_names(cls: type) -> list[str]:
    return [f.name for f in fields_of(cls)]


def from_namespace(cls: type[S], namespace: Any, **override: Any) -> S:
    """Build `cls` from parsed CLI flags (an argparse Namespace holding at least its fields)."""
    values = {name: getattr(namespace, name) for name in field_names(cls)} | override
    try:
        return cls(**values)
    except SettingsError as err:
        if not err.key:
            raise
        raise SettingsError(f"{flag(err.key)} {err.problem}", err.key, err.problem) from None


def flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def did_you_mean(unknown, known) -> str:
    """' (did you mean ...?)' for each unknown key spelled close to a known one; '' where none is."""
    near = {k: difflib.get_close_matches(k, sorted(known), n=1, cutoff=0.75) for k in unknown}
    hints = [f"{k!r}: did you mean {n[0]!r}?" for k, n in near.items() if n]
    return f" ({'; '.join(hints)})" if hints else ""


def from_mapping(cls: type[S], raw: Any, source: str, hidden: tuple[str, ...] = ()) -> S:
    """Build `cls` from a config mapping (a parsed YAML file), naming `source` and the key in errors;
    `hidden`: keys set elsewhere, left out of the keys an unknown one's error lists."""
    if not isinstance(raw, dict):
        raise SettingsError(f"{source}: a config is a mapping of keys to values, got {type(raw).__name__}")
    known = field_names(cls)
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise SettingsError(
            f"{source}: unknown key(s) {unknown}{did_you_mean(unknown, known)}; "
            f"allowed: {sorted(set(known) - set(hidden))}"
        )
    missing = [
        f.name
        for f in fields_of(cls)
        if f.name not in raw and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise SettingsError(f"{source}: missing required key(s) {missing}")
    try:
        return cls(**raw)
    except SettingsError as err:
        raise err.at(source) from None


def expanded(value: Any) -> Any:
    """A path (or each of a list of them) with a leading `~` read as the home folder, as a shell does."""
    if isinstance(value, list):
        return [expanded(v) for v in value]
    return os.path.expanduser(value) if isinstance(value, str) and value.startswith("~") else value


def against(folder: Path, value: Any) -> Any:
    """A relative path (or each of a list of them) resolved against `folder`; other values as given."""
    if isinstance(value, list):
        return [against(folder, v) for v in value]
    value = expanded(value)
    if isinstance(value, str) and not Path(value).is_absolute():
        return str((folder / value).resolve())
    return value


def fingerprint(values: dict[str, Any]) -> str:
    """A short canonical hash of JSON-able settings: equal settings, equal fingerprint."""
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """'key: old -> new' for every key whose value differs (a key on one side only included)."""
    return [
        f"{k}: {old.get(k, '<unset>')!r} -> {new.get(k, '<unset>')!r}"
        for k in sorted(set(old) | set(new))
        if old.get(k, "<unset>") != new.get(k, "<unset>")
    ]


def parse_script(cls: type[S], doc: str | None, argv: list[str] | None = None) -> S:
    """A script's settings from its command line; a bad value exits with the flag named. A class with a
    `SMOKE` dict gets `--smoke`: those values as defaults, a run that only shows the script works."""
    import argparse
    import sys

    from harness.core.plumbing.flags import FlagParser, add_settings

    p = FlagParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_settings(p, cls)
    smoke = getattr(cls, "SMOKE", None)
    if smoke is not None:
        p.add_argument(
            "--smoke",
            action="store_true",
            help=f"the smoke size {smoke}: checks the script runs; its figures mean nothing",
        )
        if p.parse_known_args(argv)[0].smoke:
            p.set_defaults(**smoke)  # flags given explicitly still win
    namespace = p.parse_args(argv)
    try:
        return from_namespace(cls, namespace)
    except UserError as err:
        sys.exit(f"error: {err}")


def key_table(cls: type) -> str:
    """One line per field: key, default, help (the config keys a YAML file may set)."""
    rows = []
    for f in fields_of(cls):
        default = (
            f.default
            if f.default is not dataclasses.MISSING
            else (f.default_factory() if f.default_factory is not dataclasses.MISSING else "(required)")
        )
        rows.append((f.name, str(default), f.metadata.get("help", "")))
    key = max([16, *(len(r[0]) for r in rows)])  # the longest key sets the column: every help aligned
    value = max([24, *(len(r[1]) for r in rows if len(r[1]) <= 40)])
    return "\n".join(f"  {k:{key}} {d:{value}} {h}" for k, d, h in rows)
