"""How every command is declared: its flags generated from settings dataclasses, its help with defaults."""

from __future__ import annotations

import argparse
import math
import typing
from pathlib import Path

EXAMPLE = '\'{"test-time-rl": {"samples": 2}}\''


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


def mapping(text: str) -> dict:
    """A flag whose value is a mapping: inline JSON or YAML, or the path of a file holding one."""
    import yaml

    stripped = text.strip()
    is_file = stripped[:1] not in "{[" and Path(stripped).is_file()
    source, body = (f"the file {stripped}", Path(stripped).read_text()) if is_file else ("it", stripped)
    fix = f"give a mapping as JSON or YAML, such as {EXAMPLE}, or a file of one"
    try:
        value = yaml.safe_load(body) if body else {}
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        said = " ".join(str(err).split())  # YAML's message spans lines: one line, as every error here
        raise argparse.ArgumentTypeError(f"{source} is neither JSON nor YAML ({said}); {fix}") from None
    if not isinstance(value, dict):
        what = "is not a file and" if not is_file else ""
        raise argparse.ArgumentTypeError(
            f"{text!r} {what} reads as {type(value).__name__}, not a mapping; {fix}".replace("  ", " ")
        )
    return value


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Each flag once (`--data-dir`, not also `--data_dir`, which still parses), its default after its help
    unless the help says it or it is empty."""

    def _get_help_string(self, action):
        text = (action.help or "").replace("%", "%%")  # a literal percent ("95% intervals"), not a format
        if "(default" in text or "default:" in text or action.default in (None, [], {}):
            return text
        return super()._get_help_string(argparse.Namespace(**{**vars(action), "help": text}))

    def _format_action_invocation(self, action):
        dashed = [o for o in action.option_strings if "_" not in o]
        if dashed and len(dashed) < len(action.option_strings):
            action = argparse.Namespace(**{**vars(action), "option_strings": dashed})
        return super()._format_action_invocation(action)


def command(group, name: str, func, help: str, *settings: type, epilog: str | None = None, aliases=()):
    """A subcommand whose flags are the fields of `settings` (transformers' HfArgumentParser)."""
    p = group.add_parser(
        name,
        aliases=list(aliases),
        dataclass_types=list(settings),
        help=help,
        description=help,
        epilog=epilog,
        formatter_class=HelpFormatter,
    )
    for action in p._actions:  # the usage line shows the first spelling: the dashed one
        action.option_strings.sort(key=lambda o: "_" in o)
        if action.type is dict or typing.get_origin(action.type) is dict:  # argparse cannot call dict[...]
            action.type = mapping
    p.set_defaults(func=func)
    return p
