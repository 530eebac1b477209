"""One public surface for plug-ins: the examples import from harness.api alone, a method file written
against it runs through `methods show`; the old names of moved modules are gone (CHANGELOG.md says where)."""

import ast
import importlib
import sys
from pathlib import Path

import pytest

from harness.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
OURS = ("harness", "tapt", "contamination", "tasks_yaml")


def test_the_examples_import_the_package_through_harness_api_alone():
    for path in (ROOT / "examples").glob("*.py"):
        names = [
            node.module
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module
        ]
        ours = {n for n in names if n.split(".")[0] in OURS}
        assert ours == {"harness.api"}, (path.name, ours)


PLUGIN = """
from dataclasses import dataclass
from harness.api import Adapted, Inputs, Method, Settings, answered, option, recipe_table

@dataclass(kw_only=True)
class Mine(Settings):
    steps: int = option(1, "steps")

def adapt(x: Inputs) -> Adapted:
    answered(x.spec, x.docs) if x.labeled else None
    return Adapted(x.model, {"learned_from": len(x.docs)})

METHOD = Method("mine", ("zero_shot",), Mine, adapt, "a plug-in", recipe=recipe_table([("a", "b", "c", "")]))
"""


def test_a_method_file_written_against_the_surface_loads(tmp_path, capsys):
    (tmp_path / "mine.py").write_text(PLUGIN)
    main(["methods", "show", f"{tmp_path / 'mine.py'}:METHOD"])
    assert "mine: a plug-in" in capsys.readouterr().out


def test_the_old_module_names_are_gone_and_the_changelog_names_where_they_went():
    for old in ("harness.tasks.splits", "tapt.raw_text", "harness.grid.run", "harness.cli.rounds"):
        sys.modules.pop(old, None)
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)
    changelog = (Path(__file__).parents[1] / "CHANGELOG.md").read_text()
    assert "`harness.tasks.splits` -> `harness.tasks.protocol`" in changelog


def test_a_boolean_is_one_switch_and_still_takes_a_value(capsys):
    from harness.cli.main import parser

    p = parser()
    calibrate = ["contamination", "calibrate", "--config", "demo"]
    assert p.parse_args([*calibrate, "--train", "false"]).train is False
    assert p.parse_args([*calibrate, "--no-train"]).train is False
    assert p.parse_args([*calibrate, "--keep_adapters", "true"]).keep_adapters is True
    assert p.parse_args(["run", "--config", "demo", "--no-summary"]).summary is False
    assert p.parse_args(["run", "--config", "demo", "--summary", "false"]).summary is False
    assert p.parse_args(["run", "--config", "demo"]).summary is True
    with pytest.raises(SystemExit):
        main([*calibrate, "--help"])
    shown = capsys.readouterr().out
    assert "[--train | --no-train]" in shown and "--train, --no-train" in shown
    assert "KEEP_ADAPTERS" not in shown and "  --no-train " not in shown
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    shown = capsys.readouterr().out
    assert "--summary, --no-summary" in shown and "--no-no-" not in shown
    # one spelling a setting: no `--data_dir` beside `--data-dir`, no `--exposure [EXPOSURE]`
    assert "--data-dir DATA_DIR" in shown and "--data_dir" not in shown and "[EXPOSURE]" not in shown
    assert p.parse_args(["run", "--config", "demo", "--data_dir", "d"]).data_dir == "d"  # still read
    assert p.parse_args(["run", "--config", "demo", "--exposure=false"]).exposure is False


def test_threads_beside_ray_are_refused_naming_the_flag_that_sets_them():
    with pytest.raises(SystemExit, match="--threads is for runs on this machine; .*--cpus-per-unit"):
        main(["run", "--config", "demo", "--ray", "--threads", "1"])
