"""How every command is declared: its flags generated from settings dataclasses, its help with defaults."""

from __future__ import annotations

import argparse


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults after each flag's help (unless the help already says its default); epilogs kept as written."""

    def _get_help_string(self, action):
        if "(default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


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
