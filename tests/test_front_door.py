"""The front door: a user's own script, outside the package, runs a tiny study, summarizes it and writes its
report through `harness` alone; the CLI prints what the same calls return."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import tiny_grid_config

import harness
from harness.core.plumbing.errors import SettingsError

SCRIPT = """
import sys
import harness

ran = harness.run(sys.argv[1], subsamples=1, threads=1)
summary = harness.summarize(ran.out)
page = harness.report(ran.out)
print(summary.text(), end="")
print("UNITS", summary["configs"][0]["bias_units"], "PAGE", page.path.name, page.size)
"""


def test_a_users_script_runs_summarizes_and_reports_through_the_front_door(tmp_path, tiny_llama, data_dir):
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out")
    script = tmp_path / "my_study.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(config)], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "UNITS 1 PAGE report.html" in done.stdout  # a config key given as a keyword: 1 of its 3 units
    assert "leak (leak-extra)" in done.stdout and "planted control:" in done.stdout
    assert (tmp_path / "out" / "report.html").read_text().startswith("<!doctype html>")
    cli = subprocess.run(
        [sys.executable, "-m", "harness.cli", "summarize", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.stdout in done.stdout  # the command prints what the call returns, byte for byte


def test_a_setting_that_is_neither_the_calls_nor_a_config_key_is_named(tmp_path, tiny_llama, data_dir):
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out")
    with pytest.raises(SettingsError, match="'subsample' is neither a setting .* did you mean 'subsamples'"):
        harness.run(config, subsample=2)
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_importing_the_front_door_loads_no_torch():
    code = "import sys, harness; harness.summarize; print(json.dumps('torch' in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) is False


def test_no_test_or_benchmark_runs_a_grid_but_through_the_front_door():
    root = Path(__file__).parents[1]
    calls = re.compile(r"\b(grid_run|run)\.run\(|execution\.run import (\w+, )*run\b")
    callers = [
        p.relative_to(root).as_posix()
        for folder in ("tests", "benchmarks", "examples")
        for p in (root / folder).rglob("*.py")
        if calls.search(p.read_text())
    ]
    assert callers == []
