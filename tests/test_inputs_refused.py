"""This round's bad inputs, each one line naming the file, key or flag and the fix, before anything is
written: task overrides, keys written twice, detector files, output paths, method settings' shapes."""

import shutil
from pathlib import Path

import pytest
from helpers import tiny_grid_config

from harness import results
from harness.cli.main import main
from harness.core.plumbing.errors import SettingsError, UserError
from harness.grid.configuration import resolve
from harness.grid.configuration.config import GridConfig, load_config
from harness.grid.configuration.run_checks import load_run
from harness.study.calibrate import load_detectors

SHIPPED = str(Path(__file__).resolve().parents[1] / "studies" / "methods_study")  # a shipped study


def test_a_task_override_names_a_task_of_the_run_and_valid_values_by_their_path(
    tmp_path, tiny_llama, data_dir
):
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out")
    with pytest.raises(
        SettingsError, match="names 'ag_nwes', which is not a task of this run \\(did you mean 'ag_news'"
    ):
        load_run(config, {"task_overrides": {"ag_nwes": {"epochs": 1}}})
    with pytest.raises(SettingsError, match="--task-overrides ag_news.epochs: must be above 0.0, got -2.0"):
        load_run(config, {"task_overrides": {"ag_news": {"epochs": -2}}})
    assert not (tmp_path / "out").exists()
    load_run(config, {"task_overrides": {"ag_news": {"epochs": 2}}})


def test_an_empty_task_override_on_a_zero_shot_run_is_the_same_settings():
    """The default holds classifier keys only, which a zero_shot run does not read."""
    assert resolve.settings_hash(GridConfig()) == resolve.settings_hash(GridConfig(task_overrides={}))
    assert resolve.settings_hash(GridConfig()) != resolve.settings_hash(
        GridConfig(task_overrides={"ag_news": {"lr": 0.1}})
    )
    classifier = {"flow": "classifier", "base": "bert-base-uncased"}
    assert resolve.settings_hash(GridConfig(**classifier)) != resolve.settings_hash(
        GridConfig(**classifier, task_overrides={})
    )


def test_a_key_written_twice_is_refused_naming_both_lines(tmp_path, tiny_llama, data_dir, capsys):
    import json

    import yaml

    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out")
    config.write_text(yaml.safe_dump(json.loads(config.read_text())) + "m: 5\n")
    with pytest.raises(SettingsError, match="key 'm' is written twice, on line \\d+ and line \\d+; keep one"):
        load_config(config)
    with pytest.raises(SystemExit):
        main(["run", "--config", str(config), "--task-overrides", '{"ag_news": {"lr": 1}, "ag_news": {}}'])
    assert "the value: key 'ag_news' is written twice" in capsys.readouterr().err
    from harness.tasks.spec import load_task_config

    (tmp_path / "tapt_x.yaml").write_text("task: tapt_x\ndataset_path: a\ntask: tapt_y\n")
    with pytest.raises(Exception, match="key 'task' is written twice, on line 1 and line 3"):
        load_task_config(tmp_path / "tapt_x.yaml")


@pytest.mark.parametrize(
    "text, target, message",
    [
        ("def f(:\n", "{f}", "failed as it loaded \\(line 1\\): SyntaxError"),
        ("raise RuntimeError('boom')\n", "{f}", "failed as it loaded: RuntimeError: boom; fix that file"),
        (
            "from contamination.detectors import register\nregister('x', 42)\n",
            "{f}",
            "failed as it loaded: PluginError: detector 'x' must be a Detector",
        ),
        ("X = 1\n", "{f}:X", "is a int, not a contamination.detectors.Detector"),
        ("X = 1\n", "{f}", "registers no detector; name its detector as FILE.py:NAME, or call register"),
    ],
)
def test_a_detector_file_that_fails_or_registers_nothing_is_one_line(tmp_path, text, target, message):
    path = tmp_path / f"det_{abs(hash(text)) % 10**6}.py"
    path.write_text(text)
    with pytest.raises(SettingsError, match=f"detectors .*{message}"):
        load_detectors([target.format(f=path)])


def test_an_output_file_is_checked_before_any_work_and_leaves_no_temporary_file(tmp_path, capsys):
    shipped = SHIPPED
    (tmp_path / "adir").mkdir()
    for out, said in (
        ("/proc/x/r.html", "cannot create a folder in /proc"),
        (tmp_path / "adir", "is a folder"),
    ):
        with pytest.raises(SystemExit, match=f"--out: .*{said}"):
            main(["report", shipped, "--out", str(out)])
        with pytest.raises(SystemExit, match=f"--out: .*{said}"):
            main(["analyze", shipped, "--out", str(out)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]
    with pytest.raises(UserError, match=r"cannot write .*adir: .*it is as it was"):
        results.atomic_write(tmp_path / "adir", b"x")  # a failed write leaves no .adir.<pid>.tmp beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]
    with pytest.raises(SystemExit, match="is a file; name the results folder a run wrote"):
        main(["summarize", __file__])


def test_train_that_learns_nothing_writes_nothing_and_names_the_help_that_lists_the_settings(
    tmp_path, tiny_llama, data_dir
):
    argv = ["train", "--task", "ag_news", "--n", "6", "--m", "4", "--quantize", "none"]
    argv += ["--base", str(tiny_llama), "--data-dir", str(data_dir)]
    nothing = "test-time-learning learned from 0 documents .*train --method test-time-learning --help"
    with pytest.raises(SystemExit, match=nothing):  # a threshold that selects nothing: said before any step
        main([*argv, "--method", "test-time-learning", "--threshold", "100", "--out", str(tmp_path / "a")])
    with pytest.raises(SystemExit, match="--epochs must be above 0.0, got 0.0"):  # refused before it loads
        main([*argv, "--epochs", "0", "--out", str(tmp_path / "b")])
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_statistic_file_is_read_by_summarize_and_report_and_one_that_registers_nothing_refused(
    tmp_path, capsys
):
    import json

    stat = tmp_path / "twice.py"
    stat.write_text(
        "from harness.api import Statistic, register\n"
        "register(Statistic('{e}_twice_gap', 'twice', 'points', lambda e: e == 'bias',\n"
        "    lambda t, c, seed: 2 * float((t - c).mean())))\n"
    )
    from harness.stats.summary.statistics import STATISTICS

    try:
        main(["summarize", SHIPPED, "--json", "--statistics", str(stat)])
    finally:
        STATISTICS.pop("{e}_twice_gap")  # other tests read the built-ins alone
    summary = json.loads(capsys.readouterr().out)
    row = summary["tasks"][0]
    assert row["bias_twice_gap"] == pytest.approx(2 * row["bias_mean"])
    (tmp_path / "none.py").write_text("X = 1\n")
    with pytest.raises(
        SystemExit,
        match="--statistics .*none.py' registers no statistic; name its statistic as FILE.py:NAME, or call",
    ):
        main(["report", SHIPPED, "--statistics", str(tmp_path / "none.py")])


def test_methods_show_aligns_every_setting_under_the_longest_key(capsys):
    main(["methods", "show", "test-time-rl"])
    lines = capsys.readouterr().out.split("settings (")[1].split("\n\n")[0].splitlines()[1:]
    starts = {len(line) - len(line[2:].split(maxsplit=2)[2]) for line in lines}
    assert len(lines) >= 10 and len(starts) == 1


def test_a_reports_own_fault_is_not_blamed_on_a_file_no_one_wrote(tmp_path, monkeypatch):
    """A value of the wrong form is blamed on calibration.json only where one was read; else the report's
    own error stands (before: every KeyError named a calibration.json that did not exist)."""
    from harness.stats.presentation import report

    def broken(*args, **kwargs):
        raise KeyError("leak_low")

    monkeypatch.setattr(report, "build", broken)
    root = tmp_path / "copy"
    shutil.copytree(SHIPPED, root)
    (root / "calibration.json").unlink(missing_ok=True)  # the shipped study's error rates
    with pytest.raises(KeyError, match="leak_low"):
        main(["report", str(root)])
    (root / "calibration.json").write_text("{}")
    with pytest.raises(SystemExit, match=r"report: a value of the wrong form in .*copy/calibration.json"):
        main(["report", str(root)])


def test_unclear_words_now_name_the_cause(tmp_path):
    """Round six's unclear rows: a file given as a model folder is said to be a file; a premise whose vote
    and greedy answer are right as often is not called 'less often right'; a broken manifest's fix says to
    restore it first (deleting it turns a confirmatory run exploratory)."""
    from harness.core.engine.models import check_base
    from harness.results import manifests
    from harness.stats.summary.diagnostics import premise_fails

    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"x")
    with pytest.raises(UserError, match=r"--checkpoint '.*model.safetensors' is a file; a model is a folder"):
        check_base(str(weights), "--checkpoint")
    said = premise_fails({"test": {"vote_accuracy": 0.0, "greedy_accuracy": 0.0}})
    assert "no more often right than" in said and "less often" not in said
    (tmp_path / "manifest-shard0of1.json").write_text("{")
    with pytest.raises(UserError, match="restore it from where the run wrote it"):
        manifests(tmp_path)


def test_a_folder_given_as_a_json_output_suggests_a_json_file(tmp_path):
    """`--out` a folder for a JSON result suggested `report.html` in it: now a file of the result's kind."""
    from harness.cli.main import main

    with pytest.raises(SystemExit, match=r"--out: .* is a folder: name a file, such as .*fits\.json"):
        main(["analyze", str(tmp_path), "--out", str(tmp_path)])
