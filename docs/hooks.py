"""MkDocs hooks: the pages generated from the code, so that none can drift from it: the command
reference (every command's `--help`, from the argparse parsers), the code map (every module's
docstring, in the order of the dependency rule) and the built-in methods' recipes against their
authors' code (what `tapt-bench methods show` prints) and the list of shipped grid configs."""

from __future__ import annotations

import ast
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the packages from the top of the dependency rule (pyproject.toml's import-linter layers) down
LAYERS = [
    "benchmarks",
    "harness/cli",
    "harness/study",
    "harness/grid",
    "harness/stats",
    "tapt",
    "contamination",
    "harness/scoring",
    "tasks_yaml",
    "harness/results",
    "harness/tasks",
    "harness/core",
    "examples",
]


def commands(parser, prefix: tuple[str, ...] = ()):
    """(words, parser) for the command and every subcommand under it; an alias is listed once."""
    yield prefix, parser
    for name, child in parser.subcommands().items():
        yield from commands(child, (*prefix, name))


def cli_reference() -> str:
    from harness.cli.main import parser

    os.environ["COLUMNS"] = "100"  # argparse wraps at the terminal's width: the same page everywhere
    parts = []
    for words, p in commands(parser()):
        title = " ".join(("tapt-bench", *words))
        parts.append(
            f"{'#' * min(2 + len(words), 4)} `{title}`\n\n```text\n{p.format_help().rstrip()}\n```\n"
        )
    return "\n".join(parts)


def docstring(path: Path) -> str:
    text = ast.get_docstring(ast.parse(path.read_text())) or ""
    return " ".join(text.split("\n\n")[0].split())


def code_map() -> str:
    lines = []
    for layer in LAYERS:
        path = ROOT / layer
        if path.is_file():
            lines.append(f"- `{layer}`: {docstring(path)}")
            continue
        init = path / "__init__.py"
        lines.append(f"- `{layer}/`: {docstring(init) if init.is_file() else ''}")
        for module in sorted(path.rglob("*.py")):
            if module.name != "__init__.py" or module.parent != path:
                name = module.relative_to(path).as_posix()
                lines.append(f"    - `{name}`: {docstring(module)}")
    return "\n".join(lines) + "\n"


def recipes() -> str:
    from tapt import methods

    return "\n".join(
        f"**`{m.name}`** (`tapt-bench methods show {m.name}`):\n\n```text\n{m.recipe}\n```\n"
        for m in methods.builtin().values()
        if m.recipe
    )


def configs() -> str:
    """Every shipped grid config with the first sentence of its leading comment."""
    lines = []
    for path in sorted((ROOT / "harness" / "grid" / "configs").glob("*.yaml")):
        head = []
        for line in path.read_text().splitlines():
            if not line.startswith("#"):
                break
            head.append(line.lstrip("# ").rstrip())
        text = " ".join(head)
        first = text.split(". ")[0].rstrip(".")
        lines.append(f"- `{path.stem}`: {first}.")
    return "\n".join(lines) + "\n"


MEASUREMENT_PAGES = [
    ("demo", "The demo"),
    ("scoring", "Scoring and analysis"),
    ("training", "Training"),
    ("detectors", "Detectors"),
    ("codec", "CoDeC"),
    ("methods", "The methods study"),
    ("methods_earlier", "The methods study, earlier runs"),
]


def measurements() -> str:
    """Every measurements page with its sections, linked."""
    import re

    def anchor(title: str) -> str:
        return re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", title.lower()).strip())

    lines = []
    for page, title in MEASUREMENT_PAGES:
        text = (ROOT / "docs" / "measurements" / f"{page}.md").read_text()
        heads = [line[3:].strip() for line in text.splitlines() if line.startswith("## ")]
        links = "; ".join(f"[{h}]({page}.md#{anchor(h)})" for h in heads)
        lines.append(f"- [{title}]({page}.md): {links}.")
    return "\n".join(lines) + "\n"


def plugin_kinds() -> str:
    from harness.core.plumbing.plugin_kinds import table

    return table() + "\n"


def built_ins() -> str:
    from harness.grid.unit.flow import BUILT_IN as FLOWS
    from tapt.methods.registry import BUILT_IN as METHODS

    rows = [f"| method | `{name}` | `{where}` |" for name, where in METHODS.items()]
    rows += [f"| flow | `{name}` | `{where}` |" for name, where in FLOWS.items()]
    return "\n".join(["| kind | name | where it is |", "|---|---|---|", *rows]) + "\n"


GENERATED = {
    "<!-- plugin kinds -->": plugin_kinds,
    "<!-- built-ins -->": built_ins,
    "<!-- measurements -->": measurements,
    "<!-- configs -->": configs,
    "<!-- cli reference -->": cli_reference,
    "<!-- code map -->": code_map,
    "<!-- recipes -->": recipes,
}


def on_page_markdown(markdown: str, page, config, files) -> str:
    for marker, make in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
