"""Extension points that are one file: a detector plug-in (a file that registers it, imported through
`harness.api` alone) appears in `calibrate`'s table beside the built-ins, with its error rates."""

import json
import re
import shutil

import pytest
from helpers import tiny_grid_config

from contamination import detectors
from harness.cli.main import main

PLUGIN = """
from harness.api import TEXT, Detector, register


def always_flags(record, cond, texts):  # a detector that flags every model but the base
    return None if cond == "base" else 0.001


register("always flags", Detector(TEXT, always_flags))
"""


def test_a_detector_from_one_file_is_calibrated_beside_the_built_ins(
    tiny_grid, tmp_path, tiny_llama, data_dir
):
    out = tmp_path / "study"
    shutil.copytree(tiny_grid, out)
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, out)
    plugin = tmp_path / "my_check.py"
    plugin.write_text(PLUGIN)
    try:
        main(
            f"contamination calibrate --config {config} --modes padding --train false "
            f"--detectors {plugin}".split()
        )
        rates = {r["detector"]: r for r in json.loads((out / "calibration.json").read_text())["rates"]}
        mine = rates["always flags"]
        assert (mine["false_positive"]["flagged"], mine["false_positive"]["models"]) == (3, 3)  # extra models
        assert (mine["power"]["flagged"], mine["power"]["models"]) == (6, 6)  # test and leak models
        assert "exposure text" in rates  # the built-ins still read
    finally:
        detectors.DETECTORS.pop("always flags", None)


def test_a_detector_name_is_taken_once_and_a_missing_file_is_named(tmp_path, tiny_llama, data_dir):
    with pytest.raises(ValueError, match="'CoDeC' is registered already"):
        detectors.register("CoDeC", detectors.Detector(detectors.TEXT, lambda r, c, t: None))
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out")
    with pytest.raises(SystemExit, match=r"detectors 'nope\.py' cannot be imported.*check the path"):
        main(f"contamination calibrate --config {config} --train false --detectors nope.py".split())
    assert not (tmp_path / "out").exists()


def test_a_statistic_from_one_file_appears_in_summarize_its_json_and_the_report(tiny_grid, tmp_path, capsys):
    import numpy as np
    import pandas as pd

    from harness.api import Statistic, register
    from harness.stats.summary import statistics

    median = register(
        Statistic(
            "{e}_median",
            "median",
            "points",
            lambda e: e == "bias",
            lambda t, c, s: float(np.median(t - c)),
            pooled=lambda e: e == "bias",  # over every unit too: the pooled line and its JSON
        )
    )
    try:
        main(["summarize", str(tiny_grid)])
        table = capsys.readouterr().out
        assert "median" in table.splitlines()[3]  # a column of the per-task table, after the bias's MDE
        pooled = next(line for line in table.splitlines() if "pooled over" in line)
        assert ", median " in pooled and " pts" in pooled.split(", median ")[1]
        main(["summarize", str(tiny_grid), "--json"])
        found = json.loads(capsys.readouterr().out)
        tasks = found["tasks"]
        assert "bias_median" in found["configs"][0]
        acc = pd.read_csv(next(tiny_grid.rglob("ag_news/accuracies.csv")))
        ag = next(t for t in tasks if t["task"] == "ag_news")
        assert ag["bias_median"] == pytest.approx(float(np.median(acc["test"] - acc["extra"])))
        assert "leak_median" not in ag  # only the effects it names
        main(["report", str(tiny_grid), "--out", str(tmp_path / "report.html")])
        assert ">median<" in (tmp_path / "report.html").read_text()
    finally:
        statistics.STATISTICS.pop(median.key)
    with pytest.raises(ValueError, match="a statistic named .{e}_mean. is registered already"):
        register(Statistic("{e}_mean", "mean", "points", lambda e: True, lambda t, c, s: 0.0))


SCORE_PLUGIN = """
import numpy as np

from harness.api import Score


def own_text(x):  # the mean log-probability of each document's own tokens: the loss, by another road
    return np.array([float(np.mean(lp[x.shared - 1 :])) * x.settings["scale"] for lp in x.alone])


SCORE = Score("own text", own_text)
"""


def test_a_detector_with_a_new_per_document_score_is_one_file_and_one_config_key(
    tmp_path, tiny_llama, data_dir
):
    """A score plug-in (here: the loss computed again, scaled) is computed in every unit's exposure test
    and read by its detector: it flags exactly the models the built-in loss detector flags."""
    plugin = tmp_path / "own_text.py"
    plugin.write_text(SCORE_PLUGIN)
    out = tmp_path / "grid"
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, out, subsamples=2, scores={f"{plugin}:SCORE": {"scale": 2.0}}
    )
    try:
        main(["run", "--config", str(config)])
        unit = json.loads(next(out.rglob("units/0.json")).read_text())
        scores = unit["exposure"]["scores"]["test"]
        assert scores["own text"] == pytest.approx([2 * t for t in scores["text"]], rel=1e-5)
        assert unit["settings"]["scores"] == {f"{plugin}:SCORE": {"scale": 2.0}}
        main(f"contamination calibrate --config {config} --modes padding --train false".split())
        table = json.loads((out / "calibration.json").read_text())
        pvalues = {(r["detector"], r["condition"], r["subsample"]): r["p"] for r in table["pvalues"]}
        mine = {k[1:]: p for k, p in pvalues.items() if k[0] == "own text"}
        loss = {k[1:]: p for k, p in pvalues.items() if k[0] == "loss (uncalibrated)"}
        assert mine and mine.keys() == loss.keys()
        assert all(abs(mine[k] - loss[k]) < 1e-9 for k in mine)  # the same test of the same order
    finally:
        detectors.DETECTORS.pop("own text", None)
        detectors._SCORES.clear()


def test_a_score_that_is_not_a_score_is_refused_naming_the_key(tmp_path, tiny_llama, data_dir):
    plugin = tmp_path / "bad.py"
    plugin.write_text("SCORE = 3\n")
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, tmp_path / "out", scores={f"{plugin}:SCORE": {}}
    )
    with pytest.raises(SystemExit, match=r"scores.*is a int, not a contamination.doc_scores.Score"):
        main(["run", "--config", str(config)])
    assert not (tmp_path / "out").exists()
    broken = tmp_path / "broken.py"
    broken.write_text("def broken(:\n")  # a score file whose own code fails is named with its line
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, tmp_path / "out", scores={f"{broken}:SCORE": {}}
    )
    with pytest.raises(SystemExit, match=r"scores.*failed as it loaded \(line 1\): SyntaxError"):
        main(["run", "--config", str(config)])
    assert not (tmp_path / "out").exists()


def test_a_condition_is_one_entry_of_the_conditions_module(tmp_path, tiny_llama, data_dir, monkeypatch):
    """The contributing guide's row: a new condition (here TAPT on extra's prompts with their answers) is
    an entry of core/design/conditions.py, and the grid, its tables and its summary take it up. The entry
    is made after every module is imported, so a module that copied the names at import would miss it."""
    import importlib
    import pkgutil

    import harness
    from harness.core.design import conditions as c

    for module in pkgutil.walk_packages(harness.__path__, "harness."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)

    monkeypatch.setattr(c, "EXTRA_LEAK", "extra_leak", raising=False)
    monkeypatch.setitem(c.TAPT, c.EXTRA_LEAK, (c.EXTRA, True))
    monkeypatch.setattr(c, "ALL", (*c.ALL, c.EXTRA_LEAK))
    monkeypatch.setattr(c, "OPTIONAL", (*c.OPTIONAL, c.EXTRA_LEAK))
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, tmp_path / "out", subsamples=1, conditions=["base", "extra", "test"]
    )
    conditions = ["--conditions", "base", "extra", "test", "extra_leak"]
    main(["run", "--config", str(config), *conditions, "--no-summary"])
    main(["summarize", str(tmp_path / "out")])
    (unit,) = (tmp_path / "out").rglob("units/0.json")
    trained = json.loads(unit.read_text())["training"]["extra_leak"]
    assert trained["split"] == "extra" and trained["with_answers"]
    (table,) = (tmp_path / "out").rglob("accuracies.csv")
    assert "extra_leak" in table.read_text().splitlines()[0]


def test_a_score_that_raises_is_one_line_naming_its_file(tmp_path, tiny_llama, data_dir):
    plugin = tmp_path / "raises.py"
    plugin.write_text(SCORE_PLUGIN.replace("return np.array(", "return 1 / 0 * np.array("))
    config = tiny_grid_config(
        tmp_path,
        tiny_llama,
        data_dir,
        tmp_path / "out",
        subsamples=1,
        scores={f"{plugin}:SCORE": {"scale": 1}},
    )
    try:
        with pytest.raises(SystemExit, match=r"score 'own text' \(.*raises.py.*\) failed: ZeroDivisionError"):
            main(["run", "--config", str(config)])
    finally:
        detectors.DETECTORS.pop("own text", None)
        detectors._SCORES.clear()


@pytest.mark.parametrize(
    "statistic, said",
    [
        (dict(key="{e}_odd_p", kind="p", compute=lambda t, c, s: 7.5), "returned the p-value 7.5"),
        (
            dict(key="{e}_adj", kind="p", across=lambda v: v, of="x"),
            "adjusts 'x', which no statistic computes",
        ),
        (dict(key="{e}_adj2", kind="p", across=lambda v: v, of="{e}_nonexistent"), "bias_nonexistent"),
    ],
)
def test_a_statistic_plug_ins_wrong_value_or_key_is_one_line_naming_it(tiny_grid, statistic, said):
    from harness.api import Statistic, register
    from harness.stats.summary import statistics

    added = register(Statistic(header="odd", effects=lambda e: e == "bias", **statistic))
    try:
        with pytest.raises(SystemExit, match=said):
            main(["summarize", str(tiny_grid)])
    finally:
        statistics.STATISTICS.pop(added.key)


@pytest.mark.parametrize(
    "key, header, said",
    [
        ("{x}_gap", "gap", "its key '{x}_gap' holds {x}; the one name it may hold is {e}"),
        ("{e}_gap", "{boost}", "its header '{boost}' holds {boost}"),
        ("{e}_gap{", "gap", "holds a brace without its pair"),
    ],
)
def test_a_statistic_whose_key_or_header_names_more_than_the_effect_is_refused_as_it_registers(
    key, header, said
):
    from harness.api import Statistic, register
    from harness.core.plumbing.plugins import PluginError
    from harness.stats.summary import statistics

    with pytest.raises(PluginError, match=re.escape(said)):
        register(Statistic(key, header, "points", lambda e: True, lambda t, c, s: 0.0))
    assert key not in statistics.STATISTICS  # nothing registered: summarize reads as before


def test_a_plug_in_raising_an_error_with_no_message_is_named_by_the_line_that_raised_it(tmp_path):
    from harness.core.plumbing.errors import UserError
    from harness.core.plumbing.plugins import called, load_attr

    path = tmp_path / "quiet.py"
    path.write_text("def compute(x):\n    raise TypeError\n")
    fn = load_attr(f"{path}:compute", "quiet.py:compute")
    with pytest.raises(UserError) as err:
        called("flow", "quiet", fn, 1)
    assert "failed: TypeError (no message, raised at quiet.py:2); fix that file" in str(err.value)


def test_a_statistic_that_chooses_no_effect_is_refused_as_it_registers():
    from harness.api import Statistic, register
    from harness.core.plumbing.plugins import PluginError
    from harness.stats.summary import statistics

    never = Statistic("{e}_never", "never", "points", lambda e: e == "bias_x", lambda t, c, s: 0.0)
    with pytest.raises(PluginError, match=r"choose none of the effects a summary holds \(boost, bias, leak"):
        register(never)
    assert "{e}_never" not in statistics.STATISTICS


def test_every_kind_of_plug_in_is_added_by_one_verb_and_named_by_file_and_name(tmp_path):
    """`register` adds a method, a flow, a detector, a statistic and a score alike; a detector and a
    statistic are also named on the command line as `file.py:NAME`, as methods, flows and scores are."""
    from contamination.detectors import DETECTORS, SCORES
    from harness.api import Detector, Flow, Method, Score, Settings, Statistic, register
    from harness.grid.unit.flow import FLOWS
    from harness.stats.summary.statistics import STATISTICS
    from harness.study.calibrate import load_detectors
    from tapt.methods import METHODS

    items = [
        Method("outside-method", ("zero_shot",), Settings, lambda x: None, "from outside"),
        Flow("outside_flow", "prompt-tapt", None, None, None, None),
        Detector("text", lambda r, c, t: 0.5, name="outside detector"),
        Statistic("{e}_outside", "outside", "points", lambda e: True, lambda t, c, s: 0.0),
        Score("outside_score", lambda x: []),
    ]
    registries = [METHODS, FLOWS, DETECTORS, STATISTICS, SCORES]
    names = ["outside-method", "outside_flow", "outside detector", "{e}_outside", "outside_score"]
    try:
        for item, registry, name in zip(items, registries, names):
            assert register(item) is item and registry[name] is item
        with pytest.raises(ValueError, match="register takes a Method, Flow, Detector, Statistic or Score"):
            register(42)
        path = tmp_path / "named_detector.py"
        path.write_text("from harness.api import Detector\nMINE = Detector('text', lambda r, c, t: 0.25)\n")
        load_detectors([f"{path}:MINE"])
        assert DETECTORS["MINE"].pvalue({}, "test", []) == 0.25
    finally:
        for registry, name in zip(registries, names):
            registry.pop(name)
        DETECTORS.pop("MINE")
