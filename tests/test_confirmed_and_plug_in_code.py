"""A confirmed result no later edit keeps confirmed, a plug-in's code in its
units, one dose however it is spelt, a report of any run, and inputs that get one line."""

import json
import shutil
from pathlib import Path

import pytest
from helpers import tiny_grid_config

import harness
from harness.cli.main import main
from harness.core.plumbing.errors import SettingsError
from harness.grid.configuration.config import load_config
from harness.grid.configuration.run_checks import load_run
from harness.results import collect

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "norm_tuning.py"


@pytest.fixture
def unscreened(monkeypatch):
    """A confirmatory zero-shot plan's tasks pass the screen (the tiny model answers at chance): what these
    tests read is the plan's records, not its screen."""
    from harness.study import screen

    monkeypatch.setattr(screen, "screened", lambda cfg: cfg)


def one_unit(tmp_path, tiny_llama, data_dir, **extra) -> Path:
    defaults = {"subsamples": 1, "conditions": ["base", "extra", "test"], "exposure": False}
    return tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out", **(defaults | extra))


def test_a_plug_in_edited_between_two_runs_is_a_unit_of_other_settings(tmp_path, tiny_llama, data_dir):
    """The plug-in's file is recorded by its hash: the same config with the file's code changed refuses
    to pool its units with the old ones, as a changed setting does (before: pooled, with no word)."""
    plugin = tmp_path / "mine.py"
    shutil.copy(EXAMPLE, plugin)
    path = one_unit(tmp_path, tiny_llama, data_dir, method=f"{plugin}:METHOD", subsamples=2)
    cfg = load_config(path)
    harness.run(cfg, shard="0/2")
    plugin.write_text(plugin.read_text() + "\n# the lr x50, say\n")
    with pytest.raises(SettingsError, match="made with other settings") as err:
        harness.run(path, shard="1/2")
    assert "method_code" in str(err.value)


def test_units_carried_to_a_new_out_are_pooled_after_the_grid_reruns(tmp_path, tiny_llama, data_dir):
    """A run's finished units copied onto another machine's --out (no tables): rerunning the grid there
    runs nothing and rebuilds the tables, so summarize reads every unit (before: it read none of them)."""
    path = one_unit(tmp_path, tiny_llama, data_dir, subsamples=2)
    harness.run(path)
    carried = tmp_path / "carried"
    for unit in (tmp_path / "out").rglob("units/*"):
        (carried / unit.relative_to(tmp_path / "out")).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(unit, carried / unit.relative_to(tmp_path / "out"))
    with pytest.raises(SystemExit, match="ag_news: 2 finished unit.* its tables are stale"):
        main(["summarize", str(carried)])
    raw = json.loads(path.read_text())
    path.write_text(json.dumps(raw | {"out": str(carried)}))
    harness.run(path)
    (log,) = carried.rglob("run-*.log")
    assert "0 units to run of 2" in log.read_text()
    got, ran = collect(carried), collect(tmp_path / "out")
    assert len(got) == 2 and got[["base", "extra", "test"]].equals(ran[["base", "extra", "test"]])


def test_a_confirmatory_plan_edited_between_rounds_refuses_to_resume_naming_the_key(
    tmp_path, tiny_llama, data_dir, unscreened
):
    path = one_unit(tmp_path, tiny_llama, data_dir, confirmatory=True, subsamples=2)
    harness.run(path, shard="0/2")
    raw = json.loads(path.read_text())
    path.write_text(json.dumps(raw | {"alpha": 0.01}))
    with pytest.raises(SettingsError, match=r"alpha: 0\.05 then, 0\.01 now"):
        harness.run(path, shard="1/2")


def test_a_manifest_edited_after_the_data_is_not_confirmed(
    tmp_path, tiny_llama, data_dir, capsys, unscreened
):
    """`sides` changed by hand in a manifest: the summary says which file was edited, and it is not
    confirmed (before: confirmed, and read with the edited test)."""
    path = one_unit(tmp_path, tiny_llama, data_dir, confirmatory=True)
    harness.run(path)
    (manifest,) = (tmp_path / "out").rglob("manifest-shard*.json")
    found = json.loads(manifest.read_text())
    found["config"]["sides"] = "one"
    manifest.write_text(json.dumps(found))
    main(["summarize", str(tmp_path / "out")])
    said = capsys.readouterr().out
    assert "exploratory: manifest-shard0of1.json was edited after its run wrote it" in said
    assert "confirmed: every planned unit" not in said


def test_one_dose_spelt_two_ways_is_one_dose_and_one_folder(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("tasks: [ag_news]\ndoses:\n  prompt-tapt: {lr: [2e-3]}\n")
    spelt = load_config(path, {"data_dir": "tests/data"})
    path.write_text("tasks: [ag_news]\ndoses:\n  prompt-tapt: {lr: [0.002]}\n")
    number = load_config(path, {"data_dir": "tests/data"})
    assert spelt.grid.doses == number.grid.doses == {"prompt-tapt": {"lr": [0.002]}}
    assert [c.dose() for c in spelt.run_configs()] == ["lr=0.002"]
    path.write_text("tasks: [ag_news]\ndoses:\n  prompt-tapt: {lr: [2e-3, 0.002]}\n")
    with pytest.raises(SettingsError, match="distinct values"):
        load_config(path, {"data_dir": "tests/data"})


def test_a_bad_dose_is_blamed_on_doses(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("tasks: [ag_news]\ndoses:\n  prompt-tapt: {lr: [abc]}\n")
    with pytest.raises(
        SettingsError, match=r"key 'doses' prompt-tapt: lr: .*must be a number, got 'abc'"
    ) as err:
        load_run(path, {"data_dir": "tests/data"})
    assert "method_settings" not in str(err.value)


def test_a_dose_of_a_method_the_run_does_not_run_is_refused(tmp_path):
    """No method named: the flow's default (prompt TAPT) runs, and a dose of self-training would be
    ignored without a word (before: it was)."""
    path = tmp_path / "c.yaml"
    path.write_text("tasks: [ag_news]\ndoses:\n  self-training: {lr: [0.01]}\n")
    with pytest.raises(SettingsError, match=r"key 'doses' self-training is not among the run's methods"):
        load_run(path, {"data_dir": "tests/data"})


def test_until_mde_on_a_plan_is_refused(tmp_path, tiny_llama, data_dir):
    path = one_unit(tmp_path, tiny_llama, data_dir, confirmatory=True)
    with pytest.raises(SystemExit, match="--until-mde stops a method once its MDE reaches a target"):
        main(["run", "--config", str(path), "--until-mde", "5"])


def test_a_seed_beyond_32_bits_is_refused_before_the_base_loads(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("tasks: [ag_news]\nseed: 1.2e29\n")
    with pytest.raises(SettingsError, match="seed"):
        load_config(path, {"data_dir": "tests/data"})


def test_report_writes_a_page_for_a_dose_run_without_the_leak(tmp_path, tiny_llama, data_dir):
    path = one_unit(tmp_path, tiny_llama, data_dir, doses={"prompt-tapt": {"lr": [0.01, 0.02]}}, subsamples=1)
    main(["run", "--config", str(path), "--no-summary"])
    main(["report", str(tmp_path / "out")])
    page = (tmp_path / "out" / "report.html").read_text()
    assert "The bias against the dose" in page and "not run" in page


def test_the_end_summary_reads_the_plans_family_as_summarize_does(
    tmp_path, tiny_llama, data_dir, capsys, monkeypatch
):
    """Two doses of one plan: the run's own closing summary and `summarize` both correct over the
    plan's two (before: the run printed `BH over 1` for each). The random base cannot pass the plan's
    screen, so it is made to (its answers all right)."""
    import numpy as np

    from harness.study import screen

    monkeypatch.setattr(
        screen, "answers", lambda model, tok, spec, docs, rule, batch: np.ones(len(docs), bool)
    )
    path = one_unit(
        tmp_path, tiny_llama, data_dir, doses={"prompt-tapt": {"lr": [0.01, 0.02]}}, confirmatory=True
    )
    main(["run", "--config", str(path)])
    at_end = [line for line in capsys.readouterr().out.splitlines() if "pooled over" in line]
    main(["summarize", str(tmp_path / "out")])
    later = [line for line in capsys.readouterr().out.splitlines() if "pooled over" in line]
    assert len(at_end) == 2 and at_end == later and all("BH over 2" in line for line in at_end)


def test_shard_zero_of_zero_says_what_n_is():
    with pytest.raises(SystemExit, match="N must be at least 1"):
        main(["run", "--config", "demo", "--shard", "0/0"])


def test_lm_evals_hook_refuses_a_cut_or_incomplete_adapter_record(tmp_path, data_dir):
    """Before: a cut or empty tapt.json was ignored, and lm_eval scored 100 other documents."""
    from harness.core.plumbing.errors import UserError
    from harness.tasks.protocol import find_spec
    from tasks_yaml.utils import FACTS, load_docs

    spec = find_spec("ag_news")
    facts = {k: getattr(spec, k) for k in FACTS if hasattr(spec, k)}
    adapter = tmp_path / "a"
    adapter.mkdir()
    record = adapter / "tapt.json"
    for text, said in (
        ('{"kind": "adap', "tapt.json is not a whole adapter record"),
        ("", "tapt.json is not a whole adapter record"),
        (
            json.dumps({"kind": "adapter", "task": "ag_news", "m": 4}),
            "does not name the adapter's n, seed, subsample",
        ),
        (json.dumps({"kind": "adapter", "task": 42}), "names no task slug \\(task: 42\\)"),
    ):
        record.write_text(text)
        with pytest.raises(UserError, match=said):
            load_docs(**facts, data_dir=str(data_dir), peft=str(adapter))
    with pytest.raises(UserError, match="--metadata n must be a whole number, got '8'"):
        load_docs(**facts, data_dir=str(data_dir), n="8", peft=str(adapter))
