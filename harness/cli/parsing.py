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

    from harness.core import yaml_files

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


BOOL_WORDS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def as_switch(p: argparse.ArgumentParser, action: argparse.Action) -> None:
    """A boolean field as one switch, `--x/--no-x`, with one help line (HfArgumentParser makes `--x [X]`
    and a `--no_x` repeating its help)."""
    container = next(g for g in p._action_groups if action in g._group_actions)
    twins = [a for a in p._actions if a is not action and a.dest == action.dest]
    for old in (action, *twins):
        for group in p._action_groups:
            if old in group._group_actions:
                group._group_actions.remove(old)
        p._actions.remove(old)
        for option in old.option_strings:
            p._option_string_actions.pop(option, None)
    dashed = [o for o in action.option_strings if "_" not in o]
    switch = container.add_argument(
        *dashed, action=Switch, dest=action.dest, default=action.default, help=action.help
    )
    for option in action.option_strings:  # the underscore spellings still parse, unshown
        if "_" in option:
            p._option_string_actions[option] = switch
            p._option_string_actions["--no_" + option[2:]] = switch
            switch.positive.add(option)


class Switch(argparse.BooleanOptionalAction):
    """`--x` sets true and `--no-x` false (also their underscore spellings)."""

    def __init__(self, option_strings, dest, **kwargs):
        self.positive = set(option_strings)  # `--no-summary` is a switch's own name, not a negation
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, option_string in self.positive)


def switch_words(argv: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """`--x true`, `--x=false` (a value after a switch, as configs write it) as `--x` or `--no-x`."""
    switches = set()
    stack = [parser]
    while stack:
        current = stack.pop()
        for option, action in current._option_string_actions.items():
            if isinstance(action, Switch) and option in action.positive:
                switches.add(option)
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack += list(action.choices.values())
    out, i = [], 0
    while i < len(argv):
        name, eq, value = argv[i].partition("=")
        following = argv[i + 1].lower() if i + 1 < len(argv) else None
        if name in switches and (eq or following in BOOL_WORDS):
            word = value.lower() if eq else following
            if word not in BOOL_WORDS:
                out.append(argv[i])  # argparse names the bad value
                i += 1
                continue
            out.append(name if BOOL_WORDS[word] else "--no-" + name[2:].replace("_", "-"))  # its negation
            i += 1 if eq else 2
        else:
            out.append(argv[i])
            i += 1
    return out


class TopParser(argparse.ArgumentParser):
    """The command line's parser: a switch given a value (`--train false`) is read as `--no-train`."""

    def parse_known_args(self, args=None, namespace=None):
        import sys

        argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(switch_words(argv, self), namespace)


def command(group, name: str, func, help: str, *settings: type, epilog: str | None = None, aliases=()):
    """A subcommand whose flags are the fields of `settings` (transformers' HfArgumentParser)."""
    classes = [t for s in settings for t in (s.parser_classes() if hasattr(s, "SECTIONS") else [s])]
    p = group.add_parser(
        name,
        aliases=list(aliases),
        dataclass_types=classes,
        help=help,
        description=help,
        epilog=epilog,
        formatter_class=HelpFormatter,
    )
    for action in list(p._actions):  # the usage line shows the first spelling: the dashed one
        action.option_strings.sort(key=lambda o: "_" in o)
        if action.type is dict or typing.get_origin(action.type) is dict:  # argparse cannot call dict[...]
            action.type = mapping
        if getattr(action.type, "__name__", "") == "string_to_bool":
            as_switch(p, action)
    p.set_defaults(func=func)
    return p
