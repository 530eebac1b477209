"""`contamination calibrate`: every detector's false-positive rate and power on models of known exposure,
from grids it trains (tiny Llama), and the error-rate arithmetic on planted p-values."""

import json
import logging

import numpy as np
import pandas as pd
import pytest
from helpers import tiny_grid_config

from contamination import detectors
from contamination.exposure import condition_tests
from harness.cli.main import main
from harness.grid.configuration import resolve


def test_error_rates_count_flags_on_models_that_did_and_did_not_see_the_test_split():
    rows = [
        # a text detector: flags test and leak models (seen), never extra; base not applicable
        *(
            {"detector": "exposure text", "condition": c, "p": p}
            for c, p in [("extra", 0.5), ("test", 0.01), ("leak", 0.02)] * 4
        ),
        # a label detector that flags the text-only test model too: a false positive
        *(
            {"detector": "exposure label", "condition": c, "p": p}
            for c, p in [("extra", 0.9), ("test", 0.01), ("leak", 0.001)] * 4
        ),
    ]
    df = pd.DataFrame(rows).assign(mode="padding")
    rates = {
        r["detector"]: r
        for r in detectors.error_rates(df, {"exposure text": "text", "exposure label": "labels"})
    }
    text, label = rates["exposure text"], rates["exposure label"]
    assert (text["false_positive"]["flagged"], text["false_positive"]["models"]) == (0, 4)
    assert (text["power"]["flagged"], text["power"]["models"]) == (8, 8)
    assert (label["false_positive"]["flagged"], label["false_positive"]["models"]) == (
        4,
        8,
    )  # the test models
    assert (label["power"]["flagged"], label["power"]["models"]) == (4, 4)
    assert 0 < text["false_positive"]["high"] < 0.6 and text["power"]["low"] > 0.6  # Wilson, not [0, 0]
    shown = detectors.format_rates(list(rates.values()))
    assert "exposure label" in shown and "4/8" in shown and "50.0%" in shown


def planted_record(seed: int = 0, text_gain: float = 2.0, label_gain: float = 3.0, seen_margin: float = -1.0):
    """A unit's exposure record with planted models: test and leak gained `text_gain` on the test
    documents' text (extra on extra's); reading a text moves its margins by `seen_margin` whatever the
    labels (extra's on extra, test's and leak's on test); leak gained `label_gain` on test's true class."""
    rng = np.random.default_rng(seed)
    n = 10
    split = np.array(["test"] * n + ["extra"] * n)
    base = {c: rng.normal(size=2 * n) for c in ("text", "mink", "margin", "confidence")}
    drops = np.random.default_rng(seed + 1)  # CoDeC's own stream: the other scores stay as they were
    scores = {"base": base | {"codec": drops.normal(scale=0.3, size=2 * n)}}
    for cond, seen, labels in (("extra", "extra", 0.0), ("test", "test", 0.0), ("leak", "test", label_gain)):
        on = split == seen
        noise = {c: rng.normal(scale=0.3, size=2 * n) for c in base}
        scores[cond] = {
            "text": base["text"] + noise["text"] + text_gain * on,
            "mink": base["mink"] + noise["mink"] + text_gain * on,
            "margin": base["margin"] + noise["margin"] + (seen_margin + labels) * on,
            "confidence": base["confidence"] + noise["confidence"],  # no model trained on its own answers
            "codec": drops.normal(scale=0.3, size=2 * n) + text_gain * on,  # the model's own, on what it read
        }
    docs = {"split": split.tolist(), "row": list(range(2 * n)), "label": [0] * (2 * n)}
    frames = {c: pd.DataFrame(s).assign(**docs) for c, s in scores.items()}
    return condition_tests(frames, "base", "loss")


def test_every_detector_reads_planted_models_and_the_twin_label_statistic_ignores_text_exposure():
    texts = [f"document {i} " * (1 + i % 3) for i in range(20)]
    flagged = {}
    for row in detectors.unit_pvalues(planted_record(), texts):
        flagged[row["detector"], row["condition"]] = row["p"] <= 0.05
    for det in ("exposure text", "loss (uncalibrated)", "Min-K%++ (uncalibrated)", "CoDeC"):
        assert flagged[det, "test"] and flagged[det, "leak"] and not flagged[det, "extra"], det
    assert ("exposure text", "base") not in flagged  # a calibrated statistic of base against itself
    # today's label statistic: reading extra's text lowered extra's margins, so test's labels look seen
    assert flagged["exposure label", "extra"] and flagged["exposure label", "leak"]
    # the twin statistic: test's margins on the text it read against extra's on the text it read
    assert not flagged["exposure label (twin)", "test"] and flagged["exposure label (twin)", "leak"]
    assert ("exposure label (twin)", "extra") not in flagged
    # no model here trained on its own answers: the confidence statistic flags none
    assert not any(flagged["exposure confidence", c] for c in ("extra", "test", "leak"))
    # the single checkpoint's verdict: a label flag beside a text flag on either side claims no labels
    assert not any(flagged["exposure label (verdict)", c] for c in ("extra", "test", "leak"))


@pytest.mark.slow
def test_the_calibrate_command_trains_every_model_and_tabulates_every_detector(
    tmp_path, tiny_llama, data_dir, capsys
):
    out = tmp_path / "cal"
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, out, subsamples=2)
    main(f"contamination calibrate --config {config} --modes padding --codec-context 2".split())
    shown = capsys.readouterr().out
    result = json.loads((out / "calibration.json").read_text())
    rates = {r["detector"]: r for r in result["rates"]}
    assert set(rates) == set(detectors.DETECTORS)
    # not seen: base and extra (2 units each; calibrated statistics skip base); seen: test and leak
    assert rates["loss (uncalibrated)"]["false_positive"]["models"] == 4
    fp, power = rates["exposure text"]["false_positive"], rates["exposure text"]["power"]
    assert (fp["models"], power["models"]) == (2, 4)
    assert rates["exposure label"]["false_positive"]["models"] == 4  # extra and test saw no labels
    assert rates["exposure label (twin)"]["false_positive"]["models"] == 2  # the test models
    assert rates["exposure label (twin)"]["power"]["models"] == 2  # the leak models
    assert rates["CoDeC"]["false_positive"]["models"] == 4 and rates["CoDeC"]["power"]["models"] == 4
    assert {r["task"] for r in result["rates_by_task"]} == {"ag_news"}
    assert len(result["pvalues"]) == sum(
        r["false_positive"]["models"] + r["power"]["models"] + r.get("null", {"models": 0})["models"]
        for r in rates.values()
    )
    assert "exposure text" in shown and "CoDeC" in shown and "calibration.json" in shown
    tdir = out / "padding" / "m4" / "n6" / "tiny" / "ag_news"
    assert (tdir / "accuracies.csv").is_file()
    # a null model a unit, adapted on a third draw: every detector's false positives on it, a column apart
    nulls = sorted(tdir.glob("null/*.json"))
    assert [p.name for p in nulls] == ["0.json", "1.json"]
    twin = "exposure label (twin)"  # reads only the models that trained on test
    assert all(r["null"]["models"] == 2 and r["null"]["units"] == 2 for d, r in rates.items() if d != twin)
    assert "null" in shown.split("detector error rates")[1].splitlines()[1]
    null = json.loads(nulls[0].read_text())
    unit = json.loads((tdir / "units" / "0.json").read_text())
    assert null["training"]["split"] == "null" and null["training"]["moved"]["norm"] > 0
    assert null["scores"]["row"] == unit["exposure"]["docs"]["row"]  # test's and extra's documents, scored
    kept = {p: p.stat().st_mtime_ns for p in nulls}
    again = f"contamination calibrate --config {config} --modes padding --codec-context 2 --subsamples 1"
    main(again.split())  # no training: the units and their null models are read
    assert {p: p.stat().st_mtime_ns for p in nulls} == kept
    fewer = {r["detector"]: r for r in json.loads((out / "calibration.json").read_text())["rates"]}
    assert fewer["loss (uncalibrated)"]["false_positive"]["models"] == 2  # subsample 0's base and extra
    assert fewer["loss (uncalibrated)"]["null"]["models"] == 1
    nulls[0].write_text(json.dumps(null | {"not_adapted": "no weight moved"}))  # the base again: left out
    main(again.split())
    unmoved = json.loads((out / "calibration.json").read_text())
    assert {r["detector"]: r for r in unmoved["rates"]}["loss (uncalibrated)"].get("null") is None
    assert any("a null model in 0 of 1 units; 1 more not adapted" in n for n in unmoved["notes"])
    nulls[0].write_text(json.dumps(null | {"settings_hash": "0" * 16}))  # a unit's settings changed since
    with pytest.raises(SystemExit, match=r"null/0.json: a null model of other settings than unit 0 .*delete"):
        main(again.split())
    main(["report", str(out / "padding")])  # one mode's grid: its page carries the detectors' table
    page = (out / "padding" / "report.html").read_text()
    assert "<h2>Detector error rates</h2>" in page and "exposure label (twin)" in page


def test_calibrate_refuses_an_unknown_mode_before_anything_is_written(tmp_path, tiny_llama, data_dir):
    out = tmp_path / "cal"
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, out)
    with pytest.raises(
        SystemExit, match=r"--modes must be some of \['padding', 'packing'\], got \['sideways'\]"
    ):
        main(f"contamination calibrate --config {config} --modes sideways".split())
    assert not out.exists()


@pytest.mark.slow
def test_calibrate_takes_a_method_and_labels_its_rates_with_it(tmp_path, tiny_llama, data_dir, capsys):
    out = tmp_path / "cal"
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, out, subsamples=1)
    main(f"contamination calibrate --config {config} --method test-time-learning".split())
    shown = capsys.readouterr().out
    rates = json.loads((out / "calibration.json").read_text())["rates"]
    # TLM has no packing setting: one mode, its own; its adapters in <model>+<method>
    assert {(r["method"], r["mode"]) for r in rates} == {("test-time-learning", "default")}
    assert {r["detector"] for r in rates} == set(detectors.DETECTORS) - {"CoDeC"}  # a grid without it
    assert (out / "default/m4/n6/tiny+test-time-learning/ag_news/accuracies.csv").is_file()
    assert "test-time-learning default  exposure text" in shown


def test_a_method_with_a_packing_setting_is_calibrated_in_both_modes_through_its_own_settings(
    tmp_path, tiny_llama, data_dir
):
    from harness.grid.configuration.config import load_config
    from harness.study.calibrate import CalibrateOptions, mode_config, modes_of

    cfg = load_config(
        tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "cal", method="self-training")
    )
    opts = CalibrateOptions(config="x", modes=["padding", "packing"])
    assert modes_of(cfg, opts) == ["padding", "packing"]
    packed = mode_config(cfg, "packing")
    # the method's own packing, under its method_settings, as every method's
    assert packed.grid.method_settings == {"self-training": {"packing": True}}
    assert resolve.method_settings(packed).packing
    assert not resolve.method_settings(mode_config(cfg, "padding")).packing
    prompt = load_config(tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "cal2"))
    assert mode_config(prompt, "packing").grid.method_settings["prompt-tapt"] == {
        "lr": 0.01,
        "batch_size": 4,
        "packing": True,
    }


@pytest.mark.slow
def test_calibrate_reads_a_study_grid_where_it_ran_and_trains_nothing(
    tiny_grid, tmp_path, tiny_llama, data_dir, capsys
):
    """A grid already run with every condition and the exposure test (the tiny grid's config, as a
    methods study's): calibrate on the same config reads its units in place; no unit is written again
    and no <out>/padding grid is made."""
    import shutil

    out = tmp_path / "study"
    shutil.copytree(tiny_grid, out)
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, out)
    written = {p: p.stat().st_mtime_ns for p in out.rglob("units/*")}
    main(f"contamination calibrate --config {config} --modes padding".split())
    assert {p: p.stat().st_mtime_ns for p in out.rglob("units/*")} == written
    assert not (out / "padding").exists()
    rates = {r["detector"]: r for r in json.loads((out / "calibration.json").read_text())["rates"]}
    assert rates["exposure text"]["power"]["models"] == 6  # the test and leak models of 3 subsamples
    assert "calibration.json" in capsys.readouterr().out


@pytest.mark.slow
def test_calibrate_until_mde_trains_no_unit_a_study_stopped_at_its_mde_and_only_its_null_models(
    tiny_grid, tmp_path, tiny_llama, data_dir, capsys, monkeypatch, caplog
):
    """A study run with --until-mde stopped short of its subsamples; calibrate with the same target reads
    its 3 units, trains none of the 2 it did not run, and adds a null model to each of the 3, reading the
    base's scores from the units rather than scoring the base again. (The tiny
    grid's 3 units of n 6 have no finite MDE: its pooled MDE is set at 4 points, as a study's that
    stopped at a target of 5; the rounds' own rule is tested with `run --until-mde`.)"""
    import shutil

    from harness.study import rounds

    monkeypatch.setattr(rounds, "pooled", lambda cfg: (4.0, 3))
    caplog.set_level(logging.INFO, logger="tapt_bench.grid")
    out = tmp_path / "study"
    shutil.copytree(tiny_grid, out)
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, out)
    units = {p: p.stat().st_mtime_ns for p in out.rglob("units/*")}
    main(f"contamination calibrate --config {config} --modes padding --subsamples 5 --until-mde 5".split())
    assert {p: p.stat().st_mtime_ns for p in out.rglob("units/*")} == units  # none trained, none rewritten
    assert sorted(p.name for p in out.rglob("null/*.json")) == ["0.json", "1.json", "2.json"]
    assert "stops at MDE" in capsys.readouterr().out
    assert caplog.text.count("train_null done") == 3 and "score_base" not in caplog.text
    rates = {r["detector"]: r for r in json.loads((out / "calibration.json").read_text())["rates"]}
    assert rates["exposure text"]["null"]["models"] == 3


@pytest.mark.slow
def test_calibrate_with_train_false_reads_the_finished_units_of_a_study_short_of_its_subsamples(
    tiny_grid, tmp_path, tiny_llama, data_dir, capsys
):
    """The tiny grid finished 3 subsamples; asked for 5 with `--train false`, calibrate reads the 3, trains
    none (no unit written, no adapter made) and says so in its notes; on an empty folder it refuses
    before writing anything."""
    import shutil

    out = tmp_path / "study"
    shutil.copytree(tiny_grid, out)
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, out)
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    main(f"contamination calibrate --config {config} --modes padding --subsamples 5 --train false".split())
    table = json.loads((out / "calibration.json").read_text())
    after = sorted(p.relative_to(out) for p in out.rglob("*") if p.name != "calibration.json")
    assert after == before
    rates = {r["detector"]: r for r in table["rates"]}
    assert rates["exposure text"]["power"]["models"] == 6  # test and leak of the 3 finished subsamples
    assert any("read 3 finished of 5 units, trained none" in note for note in table["notes"])
    # the exchangeability test reads adapters, which this grid did not keep: refused, naming the fix
    read_only = f"contamination calibrate --config {config} --modes padding --train false".split()
    with pytest.raises(
        SystemExit, match=r"0_extra: no adapter for the exchangeability test .* delete .*units"
    ):
        main([*read_only, "--exchangeability"])
    empty = tmp_path / "empty"
    with pytest.raises(
        SystemExit, match=r"nothing to calibrate under .*empty: no finished unit of these settings"
    ):
        main(f"contamination calibrate --config {config} --out {empty} --modes padding --train false".split())
    assert not (empty / "calibration.json").exists()


def test_an_interval_by_unit_widens_where_a_units_models_flag_together_and_not_where_they_are_apart():
    from harness.core.design.power import clustered_wilson, wilson

    apart = clustered_wilson([1] * 8 + [0] * 12, range(20))  # every model its own unit
    assert np.allclose(apart, wilson(8, 20), atol=0.01)
    together = clustered_wilson([1] * 8 + [0] * 12, [i // 2 for i in range(20)])  # pairs that agree
    low, high = wilson(8, 20)
    assert together[0] < low and together[1] > high
    assert (together[1] - together[0]) > 1.3 * (high - low)
    assert np.allclose(together, wilson(4, 10), atol=0.03)  # about 10 independent flags' worth
    assert np.allclose(clustered_wilson([0] * 6, [0, 0, 1, 1, 2, 2]), wilson(0, 6))  # no spread: Wilson's


def test_error_rates_count_the_units_their_models_came_from():
    rows = [
        {"detector": "d", "condition": c, "p": 0.01 if k < 3 else 0.5, "task": "t", "subsample": k}
        for k in range(6)
        for c in ("extra", "test")
    ]
    (r,) = detectors.error_rates(pd.DataFrame(rows).assign(mode="padding"), {"d": "text"})
    fp, power = r["false_positive"], r["power"]
    assert (fp["flagged"], fp["models"], fp["units"]) == (3, 6, 6)
    assert (power["flagged"], power["models"], power["units"]) == (3, 6, 6)
    both = detectors.rate(pd.Series([True] * 6 + [False] * 6), pd.Series([k // 2 for k in range(12)]))
    assert both["units"] == 6 and both["unit_high"] - both["unit_low"] > both["high"] - both["low"]
