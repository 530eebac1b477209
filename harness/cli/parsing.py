"""How every command is declared: its flags generated from settings dataclasses, its help with defaults."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from harness.core.plumbing.flags import add_settings


def positive(text: str) -> float:
    """A flag whose value is a finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give a number above 0") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: give a finite number above 0")
    return value


def natural(text: str) -> int:
    """A flag whose value is an integer of at least 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer; give one of at least 0") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give an integer of at least 0")
    return value


def command(group, name: str, func, help: str, *settings: type, epilog: str | None = None, aliases=()):
    """A subcommand whose flags are the fields of `settings`. A class made of sections gives a group of
    flags a section; where its keys may come from a file (the grid config), a flag counts only when
    given. The flags' actions are `p.flags` (by field name), the groups `p.sections` (by section name)."""
    p = group.add_parser(name, aliases=list(aliases), help=help, description=help, epilog=epilog)
    p.flags, p.sections = {}, {}
    for cls in settings:
        if hasattr(cls, "SECTIONS"):
            for section, fields in cls.SECTIONS.items():
                p.sections[section] = p.add_argument_group(cls.TITLES.get(section, section))
                p.flags |= add_settings(p.sections[section], fields, from_file=cls.CONFIG_FILE)
        else:
            p.flags |= add_settings(p, cls)
    p.set_defaults(func=func)
    return p


def strict(value: Any) -> Any:
    """A value any strict JSON parser reads: a non-finite number (an MDE of inf, a mean of no unit) is
    null; numpy numbers are plain ones."""
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # a numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def strict_json(value: Any) -> str:
    """`value` as strict JSON (no NaN, no Infinity: see strict)."""
    return json.dumps(strict(value), allow_nan=False)
