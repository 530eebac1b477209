"""How every command is declared: its flags generated from settings dataclasses, its help with defaults."""

from __future__ import annotations

import argparse


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults after each flag's help (unless the help already says its default); epilogs kept as written."""

    def _get_help_string(self, action):
        text = (action.help or "").replace("%", "%%")  # a literal percent ("95% intervals"), not a format
        if "(default" in text:
            return text
        return super()._get_help_string(argparse.Namespace(**{**vars(action), "help": text}))


def command(group, name: str, func, help: str, *settings: type, epilog: str | None = None):
    """A subcommand whose flags are the fields of `settings` (transformers' HfArgumentParser)."""
    p = group.add_parser(
        name,
        dataclass_types=list(settings),
        help=help,
        description=help,
        epilog=epilog,
        formatter_class=HelpFormatter,
    )
    p.set_defaults(func=func)
    return p
