"""Settings fields as command-line flags: one flag a field, spelled `--field-name`, its help with its default.

Written here rather than through transformers' HfArgumentParser, which gives each field two spellings
and a boolean a `--x [X]` flag beside a `--no_x` that repeats its help: a boolean is argparse's own
`BooleanOptionalAction` (`--x` / `--no-x`). Two forms a config file or a TRL user writes still parse:
a key's underscore spelling (`--data_dir`, read as `--data-dir`) and a switch given a word
(`--train false`, read as `--no-train`); neither is shown.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

from harness.core.plumbing.sections import default_of
from harness.core.plumbing.settings import flag

BOOL_WORDS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
EXAMPLE = '\'{"test-time-rl": {"samples": 2}}\''
SWITCHES: set[str] = set()  # every switch made, `--x`: a word after it is read as `--x` or `--no-x`
FLAGS: set[str] = set()  # every field's flag, `--x-y`: `--x_y` is read as it
LISTS: set[str] = set()  # every list flag, `--x a b`: a first value with a minus stays a value


def mapping(text: str) -> dict:
    """A flag whose value is a mapping: inline JSON or YAML, or the path of a file holding one."""
    import yaml

    from harness.core.plumbing import yaml_files

    stripped = text.strip()
    is_file = stripped[:1] not in "{[" and Path(stripped).is_file()
    source, body = (f"the file {stripped}", Path(stripped).read_text()) if is_file else ("it", stripped)
    fix = f"give a mapping as JSON or YAML, such as {EXAMPLE}, or a file of one"
    try:
        value = yaml_files.load(body) if body else {}
    except yaml_files.DuplicateKey as err:
        raise argparse.ArgumentTypeError(f"{source if is_file else 'the value'}: {err.problem}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        said = " ".join(str(err).split())  # YAML's message spans lines: one line, as every error here
        raise argparse.ArgumentTypeError(f"{source} is neither JSON nor YAML ({said}); {fix}") from None
    if not isinstance(value, dict):
        said = f"{text!r} reads as" if is_file else f"{text!r} is not a file and reads as"
        raise argparse.ArgumentTypeError(f"{said} {type(value).__name__}, not a mapping; {fix}")
    return value


class Switch(argparse.BooleanOptionalAction):
    """`--x` sets true, `--no-x` false; its help states its default as every generated flag's does."""

    def __init__(self, option_strings, dest, default=None, help=None, **kw):
        super().__init__(option_strings, dest, default=default, **kw)
        self.help = help  # set after: some Pythons' BooleanOptionalAction append a default of their own


class Listed(argparse.Action):
    """A list flag given twice (`--include-path a --include-path b`) holds both, as `--include-path a b`
    does; its first use replaces the default. (argparse's `extend` would add to the default.)"""

    def __call__(self, parser, namespace, values, option_string=None):
        held = getattr(namespace, self.dest, None)
        first = held is None or held is self.default  # the default object itself: not given yet
        setattr(namespace, self.dest, [*([] if first else held), *values])


class FlagParser(argparse.ArgumentParser):
    """A parser that reads `--x_y` as `--x-y` and `--x false` (or `--x=false`) as `--no-x`; its
    subcommands by name are `subcommands()` (the docs list every command's help from them)."""

    def add_subparsers(self, **kw):
        self.commands = super().add_subparsers(**kw)
        return self.commands

    def subcommands(self) -> dict[str, argparse.ArgumentParser]:
        """Each subcommand's parser by name (an alias once), none where it has no subcommands."""
        out, seen = {}, set()
        for name, child in getattr(self, "commands", argparse.Namespace(choices={})).choices.items():
            if id(child) not in seen:
                out[name] = child
                seen.add(id(child))
        return out

    def parse_known_args(self, args=None, namespace=None):
        argv = list(sys.argv[1:] if args is None else args)
        self.given = argv  # for the error's hints
        return super().parse_known_args(respelled(argv), namespace)

    def error(self, message: str):
        """argparse's error, where a flag is another command's or method's setting, with where to look."""
        if message.startswith("unrecognized arguments: "):
            given = [a.partition("=")[0] for a in message.split(": ", 1)[1].split() if a.startswith("--")]
            others = set(FLAGS)
            for child in self.subcommands().values():  # a command may know flags it did not add (train:
                others |= getattr(child, "other_flags", lambda: set())()  # the other methods' settings)
            elsewhere = [f for f in given if f in others]
            if elsewhere:
                message += (
                    f" ({', '.join(elsewhere)}: a setting of another command or method; `tapt-bench COMMAND "
                    "--help` lists a command's, `tapt-bench train --method NAME --help` a method's)"
                )
            message += switch_words(message.split(": ", 1)[1].split(), getattr(self, "given", []))
        super().error(message)


def switch_words(unrecognized: list[str], argv: list[str]) -> str:
    """A hint for a word given after an on/off flag (`--exposure maybe`): what the flag takes."""
    hints = []
    for i, word in enumerate(argv[1:], 1):
        if word in unrecognized and not word.startswith("-") and argv[i - 1] in SWITCHES:
            flag = argv[i - 1]
            hints.append(f"{flag} is on or off: {flag}, --no-{flag[2:]}, or {flag} true/false (got {word!r})")
    return f" ({'; '.join(hints)})" if hints else ""


def respelled(argv: list[str]) -> list[str]:
    """argv with a field's underscore spelling dashed, a word after a switch folded into it, and a value
    that starts with a minus (`--shard -1/2`, `--lr -1e-4`) joined to its flag, where argparse would take
    it for a flag and say "expected one argument"; the setting's own check then says what is wrong."""
    out, i, known = [], 0, FLAGS | {"--no-" + s[2:] for s in SWITCHES}
    while i < len(argv):
        name, eq, value = argv[i].partition("=")
        if name.startswith("--") and "_" in name and name.replace("_", "-") in known:
            name = name.replace("_", "-")
        following = argv[i + 1].lower() if i + 1 < len(argv) else None
        if name in SWITCHES and (eq and value.lower() in BOOL_WORDS or not eq and following in BOOL_WORDS):
            word = value.lower() if eq else following
            out.append(name if BOOL_WORDS[word] else "--no-" + name[2:])
            i += 1 if eq else 2
            continue
        negative = following is not None and re.match(r"-[\d.]", following)
        if name in FLAGS - LISTS and not eq and negative:  # a list takes `-4 1` as argparse reads it
            out.append(f"{name}={argv[i + 1]}")
            i += 2
            continue
        out.append(name + eq + value)
        i += 1
    return out


def unwrapped(tp: Any) -> Any:
    """X of `X | None`."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        return rest[0] if len(rest) == 1 else str
    return tp


def shown_default(help: str, default: Any) -> str:
    """The help with its default, unless it says it or there is none to show ('%' kept literal)."""
    text = help.replace("%", "%%")
    if "(default" in help or "default:" in help or default in (None, [], {}, dataclasses.MISSING):
        return text
    return f"{text} (default: {str(default).replace('%', '%%')})"


def add_field(where, field: dataclasses.Field, tp: Any, from_file: bool = False) -> argparse.Action:
    """One field's flag. `from_file`: a config key, which counts only when given (its value otherwise is
    the file's, else the key's default, which the help shows)."""
    tp, default = unwrapped(tp), default_of(field)
    kw: dict[str, Any] = {"help": shown_default(field.metadata.get("help", ""), default), "dest": field.name}
    if default is dataclasses.MISSING:
        kw["required"] = True
    else:
        kw["default"] = argparse.SUPPRESS if from_file else default
    origin = typing.get_origin(tp)
    if tp is bool:
        kw["action"] = Switch
        SWITCHES.add(flag(field.name))
    elif origin is Literal:
        choices = list(typing.get_args(tp))
        kw |= {"choices": choices, "type": type(choices[0])}
    elif origin is list:
        kw |= {"nargs": "+", "type": (typing.get_args(tp) or (str,))[0], "action": Listed}
        LISTS.add(flag(field.name))
    elif tp is dict or origin is dict:
        kw["type"] = mapping
    else:
        kw["type"] = tp
    FLAGS.add(flag(field.name))
    return where.add_argument(flag(field.name), **kw)


def with_default(field: dataclasses.Field, defaults: dict) -> dataclasses.Field:
    """The field, with its default from `defaults` where that names it (a script's own default)."""
    if field.name not in defaults:
        return field
    changed = copy.copy(field)
    changed.default, changed.default_factory = defaults[field.name], dataclasses.MISSING
    return changed


def add_settings(
    where, cls: type, from_file: bool = False, skip=(), defaults: dict | None = None
) -> dict[str, argparse.Action]:
    """Every field of a settings dataclass (but those in `skip`: flags already there) as a flag of `where`
    (a parser or a group of one); the actions by field name. Settings made of sections give each section a
    group of `where` (a parser), under its title."""
    if hasattr(cls, "SECTIONS"):
        actions: dict[str, argparse.Action] = {}
        for name, section in cls.SECTIONS.items():
            group = where.add_argument_group(cls.TITLES.get(name, name))
            actions |= add_settings(group, section, from_file, skip, cls.DEFAULTS)
        return actions
    hints = typing.get_type_hints(cls)
    fields = [with_default(f, (defaults or {})) for f in dataclasses.fields(cls) if f.name not in skip]
    return {f.name: add_field(where, f, hints[f.name], from_file) for f in fields}
