"""`tapt-bench methods list` and `methods show NAME`: the adaptation methods the grid can audit."""

from __future__ import annotations

import argparse

from harness.cli.parsing import command
from harness.core.plumbing.settings import key_table


def cmd_methods_list(args: argparse.Namespace) -> None:
    from tapt import methods

    found = {**methods.builtin(), **{name: methods.find(name) for name in methods.METHODS.installed()}}
    width = max(map(len, found))
    for name, m in found.items():
        print(f"{name:{width}}  {','.join(m.flows):20} {m.source:24} {m.about}")


def cmd_methods_show(args: argparse.Namespace) -> None:
    from harness.grid.unit.flow import FLOWS, default_method
    from tapt import methods

    m = methods.find(args.name)
    where = (
        f" (method_settings: {{{m.name}: {{...}}}}, or, as the flow's default method, the config's own keys)"
        if any(f in FLOWS and default_method(f) == m.name for f in m.flows)
        else f" (method_settings: {{{m.name}: {{...}}}})"
    )
    ran = "" if m.source == "built in" else " (naming it ran its top-level code, as importing a plugin does)"
    print(f"{m.name}: {m.about}\nflows: {', '.join(m.flows)}; from: {m.source}{ran}\nsettings{where}:")
    print(key_table(m.settings))
    if m.recipe:
        print(f"\nthe recipe against its authors' code:\n{m.recipe}")


def add_commands(sub) -> None:
    group = sub.add_parser(
        "methods",
        help="the adaptation methods a grid can audit",
        description="the adaptation methods a grid can audit: built in, installed, or named by file",
    ).add_subparsers(dest="action", required=True)
    command(
        group, "list", cmd_methods_list, "every method: built in, installed (entry points), with its flows"
    )
    p = command(group, "show", cmd_methods_show, "one method's settings with their defaults, and its source")
    p.add_argument("name", help="a built-in or installed name, or package.module:attr")
