"""One rule for every kind of plug-in: an installed entry point names the value (`module:NAME`), of each
of the five kinds of plugin_kinds.KINDS; one that names nothing registrable is one line."""

import json
import subprocess
import sys
from pathlib import Path

from harness.core.plumbing.plugin_kinds import KINDS

PLUGINS = """
import dataclasses

from harness.api import FLOWS, TEXT, Detector, Method, Score, Settings, Statistic, Adapted

METHOD = Method("mine-method", ("zero_shot",), Settings, lambda x: Adapted(x.model), "an installed method")
FLOW = dataclasses.replace(FLOWS.held("zero_shot"), name="mine-flow")  # held: no entry point read
DETECTOR = Detector(TEXT, lambda record, cond, texts: None, "mine-detector")
STATISTIC = Statistic("{e}_mine", "mine", "points", lambda e: True, lambda t, c, s: 0.0)
SCORE = Score("mine-score", lambda x: None)
NOT_A_STATISTIC = 3
"""

NAMES = {
    "method": "METHOD",
    "flow": "FLOW",
    "detector": "DETECTOR",
    "statistic": "STATISTIC",
    "score": "SCORE",
}

STUDY = Path(__file__).parents[1] / "studies" / "methods_study"
READ = """
import json
from harness import api
from harness.core.plumbing.plugins import REGISTRIES

found = {kind: sorted(REGISTRIES[kind]) for kind in REGISTRIES}
print(json.dumps(found))
"""


def installed(tmp_path, points: dict[str, str]):
    """A tiny installed distribution on its own path entry: my_plugins.py and its entry points."""
    site = tmp_path / "site"
    (site / "my_plugins-0.1.dist-info").mkdir(parents=True)
    (site / "my_plugins.py").write_text(PLUGINS)
    (site / "my_plugins-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: my-plugins\nVersion: 0.1\n"
    )
    text = "".join(f"[{group}]\n{line}\n" for group, line in points.items())
    (site / "my_plugins-0.1.dist-info" / "entry_points.txt").write_text(text)
    return site


def run(site, code: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_an_entry_point_of_each_kind_names_its_value_and_is_registered(tmp_path):
    site = installed(tmp_path, {k.group: f"mine = my_plugins:{k.example.rpartition(':')[2]}" for k in KINDS})
    done = run(site, READ)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert "mine-method" in found["method"] and "mine-flow" in found["flow"]
    assert "mine-detector" in found["detector"] and "{e}_mine" in found["statistic"]
    assert found["score"] == ["mine-score"]
    assert {"prompt-tapt", "zero_shot", "CoDeC"} <= {*found["method"], *found["flow"], *found["detector"]}


def test_a_statistics_entry_point_that_names_nothing_registrable_is_one_line(tmp_path):
    for value, said in (
        ("my_plugins", "names a module, not a statistic: name the value, as my_plugins:NAME"),
        ("my_plugins:NOT_A_STATISTIC", "names a int, not a harness.stats.summary.statistics.Statistic"),
        ("my_plugins:NOWHERE", "cannot be imported"),
    ):
        site = installed(tmp_path / value.replace(":", "_"), {"tapt_bench.statistics": f"odd = {value}"})
        done = run(site, f"from harness.cli.main import main; main(['summarize', {str(STUDY)!r}])")
        assert done.returncode == 1 and done.stdout == "", done.stderr[-2000:]
        assert (
            done.stderr.strip().splitlines()
            == [f"tapt-bench: error: entry point odd = {value} (group tapt_bench.statistics) " + said]
            or said in done.stderr
        ), done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
