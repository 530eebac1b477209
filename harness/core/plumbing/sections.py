"""Settings made of sections side by side, as TRL's scripts parse `(ScriptArguments, GRPOConfig,
ModelConfig)`: flat keys in, each key held by the one section that declares it.

Also the one rule for which keys a results record holds (`recorded`): every key, unless its settings
class says otherwise in `RECORD` or `PARTS`:
- `RECORD[key] = NEVER`: it cannot change a number (where results go, what a run is called);
- `RECORD[key] = WHEN_SET`: it was added after results were first recorded, so it is recorded only when
  it differs from its default, and older results keep their hash;
- `RECORD[key] = since(value)`: as WHEN_SET, against the value the first results ran with rather than
  the default, where the default changed when the key was added;
- `PARTS[key] = part`: it configures a part of a run that can be off (the stream condition, the
  exposure test), and is recorded only when that part is on.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any, ClassVar

from harness.core.plumbing.errors import SettingsError
from harness.core.plumbing.settings import NEVER, WHEN_SET, Settings, did_you_mean, merged


def default_of(field: dataclasses.Field) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def recorded(settings: Settings, parts: dict[str, bool] | None = None) -> dict[str, Any]:
    """The keys of `settings` a results record holds, by its class's RECORD and PARTS (see above);
    `parts` says which parts are on (a part not named is on)."""
    rules, owned = merged(type(settings), "RECORD"), merged(type(settings), "PARTS")
    parts, values, out = parts or {}, dataclasses.asdict(settings), {}
    for field in dataclasses.fields(settings):
        rule, part = rules.get(field.name), owned.get(field.name)
        if rule == NEVER or not parts.get(part, True):
            continue
        if rule == WHEN_SET and getattr(settings, field.name) == default_of(field):
            continue
        if isinstance(rule, tuple) and getattr(settings, field.name) == rule[1]:  # since(first)
            continue
        out[field.name] = values[field.name]
    return out


class Sections:
    """Sections of settings held side by side (`SECTIONS`: attribute -> Settings class). It is built from
    flat keys, each passed to its section (which checks its types and bounds); `check` then looks
    across sections. A key is read on its section (`config.grid.conditions`, a typed attribute);
    `replace` makes a new one from flat keys."""

    SECTIONS: ClassVar[dict[str, type[Settings]]] = {}
    TITLES: ClassVar[dict[str, str]] = {}  # a section's title in --help
    CONFIG_FILE: ClassVar[bool] = False  # its keys may come from a file: a flag then counts only when given
    DEFAULTS: ClassVar[dict[str, Any]] = {}  # a script's own defaults over its sections' (flags show them)

    def __init__(self, **keys: Any) -> None:
        keys = self.DEFAULTS | keys
        owners = self.owners()
        unknown = sorted(set(keys) - set(owners))
        if unknown:
            raise SettingsError(
                f"unknown key(s) {unknown}{did_you_mean(unknown, owners)}; allowed: {sorted(owners)}"
            )
        for name, cls in self.SECTIONS.items():
            own = {k: v for k, v in keys.items() if owners[k] == name}
            object.__setattr__(self, name, cls(**own))
        self.complete()
        for section in self.sections().values():  # read-only from here: `replace` makes a new one
            section.__dict__["read_only"] = True
        self.check()

    def complete(self) -> None:
        """Fill values that follow from others (before the keys are read through and checked); a section
        is not changed after: `replace` makes a new one."""

    def check(self) -> None:
        """Checks across sections; subclasses extend."""

    @classmethod
    def owners(cls) -> dict[str, str]:
        """Each key -> the section that holds it."""
        return owners_of(cls)

    @classmethod
    def fields(cls) -> list[dataclasses.Field]:
        return [f for section in cls.SECTIONS.values() for f in dataclasses.fields(section)]

    @classmethod
    def hints(cls) -> dict[str, Any]:
        """Each key's type annotation, over every section."""
        return {k: v for section in cls.SECTIONS.values() for k, v in typing.get_type_hints(section).items()}

    @classmethod
    def merged(cls, name: str) -> dict:
        """A ClassVar (PATHS, MINIMUM, ...) merged over every section."""
        return {k: v for section in cls.SECTIONS.values() for k, v in merged(section, name).items()}

    def sections(self) -> dict[str, Settings]:
        return {name: self.__dict__[name] for name in self.SECTIONS}

    def keys(self) -> dict[str, Any]:
        """Every key and its value, flat (as a config file writes them)."""
        return {f.name: getattr(s, f.name) for s in self.sections().values() for f in dataclasses.fields(s)}

    def replace(self, **keys: Any):
        """A copy with `keys` changed, checked as a new one."""
        return type(self)(**(self.keys() | keys))

    def __getattr__(self, key: str) -> Any:  # reached only for names that are not attributes
        owner = self.owners().get(key)
        if owner is not None:
            raise AttributeError(f"{type(self).__name__} holds {key!r} on its section: read .{owner}.{key}")
        raise AttributeError(f"{type(self).__name__} has no key {key!r}")

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(
            f"{type(self).__name__} is read-only: make a changed copy with replace({key}=...)"
        )

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.keys() == other.keys()

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={section!r}" for name, section in self.sections().items())
        return f"{type(self).__name__}({inner})"


@functools.cache
def owners_of(cls: type[Sections]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, section in cls.SECTIONS.items():
        for field in dataclasses.fields(section):
            if field.name in out or field.name in cls.SECTIONS:  # a programming error, not a user's
                raise TypeError(f"{cls.__name__}: key {field.name!r} is declared twice")
            out[field.name] = name
    return out
