"""The docs' commands are real: every `tapt-bench ...` line in the README and docs/ parses with today's
command line (its subcommands and flags exist), every shipped config it names exists, and every link
from the README into docs/ points at a page that exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CODE_SPAN = re.compile(r"`(tapt-bench [^`]+)`")


def commands(text: str) -> tuple[list[str], list[str]]:
    """The tapt-bench command lines of a page's code blocks (continuations joined), and the commands its
    prose names in code spans (often only a command's words and a flag or two)."""
    lines, spans = [], []
    for line in text.replace("\\\n", " ").split("\n"):
        if line.startswith("    ") or not line.strip().startswith(("`", "-", "|")) and "tapt-bench" in line:
            for part in line.strip().split("&&"):
                part = part.strip().removeprefix(".venv/bin/")
                if part.startswith("tapt-bench "):
                    lines.append(part)
        spans += [s.removeprefix(".venv/bin/") for s in CODE_SPAN.findall(line)]
    return lines, [s for s in spans if s not in lines]


def argv_of(command: str) -> list[str]:
    """A documented command as arguments: comments, optional [...] parts, `a|b` choices (the first) and
    `...` dropped; `$(...)` stands for a path."""
    command = re.sub(r"\$\([^)]*\)", "PATH", command.split("  #")[0])
    command = re.sub(r"\[[^\[\]]*\]", "", command)
    words = [w for w in shlex.split(command)[1:] if w not in ("...", "|")]
    return [w.split("|")[0] if w.startswith("-") or "|" in w and " " not in w else w for w in words]


DOCUMENTED = sorted({c for page in PAGES for c in commands(page.read_text())[0]})
NAMED = sorted({c for page in PAGES for c in commands(page.read_text())[1]})


def test_the_docs_hold_the_commands_users_run():
    joined = "\n".join(DOCUMENTED)
    for needed in ("tapt-bench run --config demo", "tapt-bench contamination exposure", "tapt-bench train"):
        assert needed in joined
    assert len(DOCUMENTED) > 40


@pytest.mark.parametrize("command", DOCUMENTED)
def test_every_documented_command_parses(command):
    from harness.cli.analyze import with_subcommand
    from harness.cli.main import parser
    from harness.grid.configuration.config import CONFIGS_DIR

    argv = with_subcommand(argv_of(command))
    if "--help" in argv or "-h" in argv:
        with pytest.raises(SystemExit) as done:
            parser(argv).parse_args(argv)
        assert done.value.code == 0, command
        return
    try:
        args = parser(argv).parse_args(argv)
    except SystemExit:
        pytest.fail(f"the documented command does not parse: {command}")
    config = getattr(args, "config", None)
    if config and not config.endswith((".yaml", ".yml")):
        assert (CONFIGS_DIR / f"{config}.yaml").is_file(), f"{command}: no shipped config {config!r}"


@pytest.mark.parametrize("span", NAMED)
def test_every_command_the_prose_names_exists_with_its_flags(span):
    from harness.cli.analyze import with_subcommand
    from harness.cli.main import parser

    p, words = parser(), with_subcommand(argv_of(span))
    while words and not words[0].startswith("-") and p.subcommands():
        assert words[0] in p.subcommands(), f"{span}: no command {words[0]!r}"
        p = p.subcommands()[words.pop(0)]
    # the flags its help shows, and the config keys calibrate reads without listing them
    known = set(re.findall(r"--[\w-]+", p.format_help()))
    known |= {"--" + key.replace("_", "-") for key in getattr(p, "flags", {})}
    flags = [w.split("=")[0] for w in words if w.startswith("--")]
    assert set(flags) <= known, f"{span}: no flag {sorted(set(flags) - known)}"


def test_the_readme_links_only_to_pages_that_exist():
    text = (REPO / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]*)(?:#[^)]*)?\)", text)
    assert links and all((REPO / link).exists() for link in links), [
        link for link in links if not (REPO / link).exists()
    ]


def test_every_extension_in_the_contributing_guide_is_one_file_and_names_the_test_that_shows_it():
    text = (REPO / "docs" / "contributing.md").read_text()
    rows = [r for r in text.splitlines() if r.startswith("| a ")]
    assert len(rows) >= 9
    for row in rows:
        extension, files, _, shown = (c.strip() for c in row.strip("|").split(" | "))
        assert files.startswith("1"), f"{extension}: {files} files"
        module, name = shown.strip("`").split("::")
        source = (REPO / "tests" / module).read_text()
        assert f"def {name}(" in source, f"{extension}: no test {shown}"


CODE_PATH = re.compile(
    r"(?<![\w/.-])((?:harness|tapt|contamination|benchmarks|tests|examples|tasks_yaml|studies)/[\w./*-]+)"
)
DOTTED = re.compile(r"`((?:harness|tapt|contamination)(?:\.\w+)+)`")
TEST_REF = re.compile(r"(test_\w+\.py)::(\w+)")
# named as history, each beside the words that say it is gone
GONE = {
    "benchmarks/exposure_power.py",  # "the earlier ... (now this command)": contamination calibrate
    "studies/table1_minilm_running/",  # "the commit that ships the cell removes that folder"
    "studies/table1_minilm_running/resume.sh",
}


def resolves(name: str) -> bool:
    """A dotted name is a module, or an attribute of the longest module it starts with."""
    import importlib

    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(found, attr):
                return False
            found = getattr(found, attr)
        return True
    return False


def test_every_file_module_and_test_the_docs_name_exists():
    """A page that names `harness/grid/unit/flow.py`, `harness.api.register` or
    `test_plugins.py::test_...` points at something that is there today, or says it is gone."""
    pages = [*PAGES, *sorted((REPO / "docs" / "measurements").glob("*.md"))]
    missing = []
    for page in pages:
        text = page.read_text()
        for path in {m.rstrip(".,:;)") for m in CODE_PATH.findall(text)} - GONE:
            if not (REPO / path).exists() and not list(REPO.glob(path)):
                missing.append(f"{page.name}: {path}")
        for name in set(DOTTED.findall(text)):
            if not name.endswith(".json") and not resolves(name):
                missing.append(f"{page.name}: {name}")
        for file, test in set(TEST_REF.findall(text)):
            found = REPO / "tests" / file
            if not found.is_file() or f"def {test}(" not in found.read_text():
                missing.append(f"{page.name}: {file}::{test}")
    assert missing == []
