"""The grid: its layout, the leak condition, killed and resumed runs, shards and merge, config errors."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers import TINY_GRID_DIR, grid_tables
from helpers import tiny_grid_config as config

import harness
from harness import merge
from harness.cli.main import main
from harness.core.plumbing.errors import SettingsError, TaskError, UserError
from harness.grid.configuration import plan
from harness.grid.configuration.run_checks import load_run

MODEL_DIR = "m4/n6/tiny"


def test_layout_rows_and_the_leak_condition(tiny_grid):
    acc, probs = grid_tables(tiny_grid)
    assert list(acc.columns) == ["base", "extra", "test", "majority", "num_classes", "majority_all", "leak"]
    assert len(acc) == 3 and (acc["num_classes"] == 4).all() and (acc["majority_all"] == 0.25).all()
    assert len(probs) == 3 * 4 * 6 and set(probs["condition"]) == {"base", "extra", "test", "leak"}
    predicted = probs["probs"].map(lambda p: int(max(range(len(p)), key=p.__getitem__)))
    assert probs["probs"].map(len).eq(4).all() and (predicted == probs["label"]).eq(probs["correct"]).all()
    per_condition = probs.groupby(["subsample", "condition"])["correct"].mean().unstack()
    conditions = ["base", "extra", "test", "leak"]
    assert per_condition[conditions].to_numpy() == pytest.approx(acc[conditions].to_numpy())
    assert (acc[conditions] * 6).round(6).mod(1).eq(0).all().all()  # accuracies are counts of 6 docs
    unit = json.loads((tiny_grid / TINY_GRID_DIR / "units" / "0.json").read_text())
    trained = unit["training"]
    assert trained["leak"]["with_answers"] is True and trained["test"]["with_answers"] is False
    assert unit["training"]["leak"]["split"] == unit["training"]["test"]["split"] == "test"
    assert set(unit["seconds"]) == {
        "score_base",
        *(f"{s}_{c}" for c in conditions[1:] for s in ("train", "score")),
        *(f"exposure_{c}" for c in conditions),
        *(f"gold_{c}" for c in conditions),  # the leak's manipulation check, under every condition's model
    }
    control = unit["control"]  # the prompt flow: the leak at test's steps, its answers' log p beside extra's
    assert len(set(control["steps"].values())) == 1 and control["steps"]["leak"] == trained["leak"]["steps"]
    assert control["tokens_seen"]["leak"] > control["tokens_seen"]["test"]  # its answers, not more prompts
    assert {c: len(v) for c, v in control["gold_log_probs"].items()} == dict.fromkeys(conditions, 6)
    manifest = json.loads((tiny_grid / MODEL_DIR / "manifest-shard0of1.json").read_text())
    assert manifest["finished_units"] == [["ag_news", 0], ["ag_news", 1], ["ag_news", 2]]
    assert manifest["settings_hash"] == unit["settings_hash"] and manifest["versions"]["lm_eval"]
    log = "".join(p.read_text() for p in (tiny_grid / MODEL_DIR / "logs").glob("run-*.log"))
    assert "'loss'" in log  # the Trainer's step dicts go to the run's log, not the terminal
    assert log.count("torch thread(s)") == 3  # each unit says with how many threads it ran


def test_the_summary_of_a_run_names_the_leak_and_the_changes(tiny_grid, capsys):
    import harness

    shown = harness.summarize(tiny_grid / MODEL_DIR).text()
    assert "leak (leak-extra)" in shown and "leak/extra" in shown and "MDE" in shown
    assert "ag_news" in shown and "{'loss'" not in shown
    assert "exposure test (test vs extra documents against base" in shown and "(3 units, m=4 n=6)" in shown


def test_every_unit_records_its_exposure_tests_and_each_documents_scores(tiny_grid, capsys):
    from harness.results import exposure_tests

    tests = exposure_tests(tiny_grid)
    assert len(tests) == 3 * 4 and set(tests["condition"]) == {"base", "extra", "test", "leak"}
    assert not tests.set_index("condition").loc["base", "calibrated"].any()  # base has no reference
    assert tests.set_index("condition").loc["test", "calibrated"].all()
    assert tests[["text_p_test", "label_p_test"]].stack().between(1 / 924, 1).all()  # C(12, 6) splits
    unit = json.loads((tiny_grid / TINY_GRID_DIR / "units" / "0.json").read_text())["exposure"]
    assert unit["docs"]["split"].count("test") == unit["docs"]["split"].count("extra") == 6
    assert set(unit["scores"]) == {"base", "extra", "test", "leak"} and unit["text_score"] == "loss"
    assert all(len(v) == 12 for scores in unit["scores"].values() for v in scores.values())
    main(["summarize", str(tiny_grid), "--json"])
    shares = json.loads(capsys.readouterr().out)["exposure"]
    assert [s["task"] for s in shares] == ["ag_news"] and shares[0]["units"] == 3
    assert set(shares[0]) >= {"extra", "test", "leak"} and 0 <= shares[0]["leak"]["label"] <= 1


def test_a_rerun_skips_finished_units_and_writes_nothing(tiny_grid, tmp_path, tiny_llama, data_dir):
    out = tmp_path / "copy"
    shutil.copytree(tiny_grid, out)
    cfg = load_run(config(tmp_path, tiny_llama, data_dir, out))
    before = {p: p.stat().st_mtime_ns for p in out.rglob("units/*")}
    harness.run(cfg)
    assert {p: p.stat().st_mtime_ns for p in out.rglob("units/*")} == before
    # the rerun's manifest keeps the first run's record: the units it finished, its code and its seconds
    (manifest,) = out.rglob("manifest-shard0of1.json")
    found = json.loads(manifest.read_text())
    assert found["finished_units"] == [] and len(found["earlier_runs"]) == 1
    first = found["earlier_runs"][0]
    assert first["finished_units"] == [["ag_news", k] for k in range(3)] and first["seconds"] > 0
    manifest.write_text("{")  # cut by hand: named before the run writes anything, not dropped
    logs = set(out.rglob("run-*.log"))
    with pytest.raises(UserError, match=r"manifest-shard0of1\.json: not valid JSON"):
        harness.run(cfg)
    assert set(out.rglob("run-*.log")) == logs


@pytest.mark.slow
def test_a_shard_recomputes_its_units_and_merges_with_the_rest_into_the_unsharded_run(
    tiny_grid, tmp_path, tiny_llama, data_dir
):
    cfg = load_run(config(tmp_path, tiny_llama, data_dir, tmp_path / "s1"))
    assert [k for _, k in plan.shard_keys(cfg, (0, 2))] == [0, 2] and [
        k for _, k in plan.shard_keys(cfg, (1, 2))
    ] == [1]
    harness.run(cfg, shard="1/2")  # unit 1, computed again in this process
    rest = tmp_path / "s0"  # shard 0/2 of the shared run: its units 0 and 2
    shutil.copytree(tiny_grid, rest)
    for path in (rest / TINY_GRID_DIR / "units").glob("1.*"):
        path.unlink()
    merge([rest, tmp_path / "s1"], tmp_path / "merged")
    for got, want in zip(grid_tables(tmp_path / "merged"), grid_tables(tiny_grid)):
        pd.testing.assert_frame_equal(got, want)


def test_merge_refuses_shards_run_with_other_settings_and_missing_folders(tiny_grid, tmp_path):
    odd = tmp_path / "odd"
    shutil.copytree(tiny_grid, odd)
    unit = odd / TINY_GRID_DIR / "units" / "1.json"
    record = json.loads(unit.read_text())
    record["settings"]["lr"], record["settings_hash"] = 0.5, "0123456789abcdef"
    unit.write_text(json.dumps(record))
    with pytest.raises(
        SettingsError, match="cannot merge m4/n6/tiny: .* different settings:\n  lr: 0.01 -> 0.5"
    ):
        merge([tiny_grid, odd], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()
    with pytest.raises(UserError, match=r"merge: no such results folder\(s\) \['.*nowhere'\]"):
        merge([tiny_grid, tmp_path / "nowhere"], tmp_path / "merged")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match=r"hold\(s\) no finished unit"):
        main(["merge", str(tmp_path / "empty"), "--out", str(tmp_path / "merged")])


def test_merge_takes_overlapping_units_that_differ_only_in_timings_and_names_the_shards_that_disagree(
    tiny_grid, tmp_path
):
    retimed, odd = tmp_path / "retimed", tmp_path / "odd"
    for copy in (retimed, odd):
        shutil.copytree(tiny_grid, copy)
    unit = retimed / TINY_GRID_DIR / "units" / "1.json"
    record = json.loads(unit.read_text())
    record["seconds"] = {k: v + 1.0 for k, v in record["seconds"].items()}  # another run's timings
    steps = [t for t in record["training"].values() if isinstance(t, dict) and "seconds_per_step" in t]
    assert steps  # a resumed run's training records time their steps again
    for t in steps:
        t["seconds_per_step"] += 1.0
    unit.write_text(json.dumps(record))
    merge([tiny_grid, retimed], tmp_path / "merged")  # the same numbers: accepted
    manifests = sorted(p.name for p in (tmp_path / "merged").rglob("manifest-shard*.json"))
    assert manifests and manifests == sorted(p.name for p in Path(tiny_grid).rglob("manifest-shard*.json"))
    for got, want in zip(grid_tables(tmp_path / "merged"), grid_tables(tiny_grid)):
        pd.testing.assert_frame_equal(got, want)
    unit = odd / TINY_GRID_DIR / "units" / "2.json"
    record = json.loads(unit.read_text())
    record["test"] += 0.125  # another number, whatever the accuracy was
    unit.write_text(json.dumps(record))
    with pytest.raises(
        SystemExit, match=f"unit {TINY_GRID_DIR}/units/2.json differs between .*full/.* and {odd}"
    ):
        main(["merge", str(tiny_grid), str(odd), "--out", str(tmp_path / "merged2")])
    assert not (tmp_path / "merged2").exists()  # nothing half-merged is left
    (tmp_path / "a_file").write_text("")
    with pytest.raises(SystemExit, match="merge: --out .*a_file: .*a_file is a file, not a folder"):
        main(["merge", str(tiny_grid), "--out", str(tmp_path / "a_file")])


@pytest.mark.slow
def test_a_rerun_with_other_settings_refuses_then_overwrite_recomputes(tmp_path, tiny_llama, data_dir):
    out = tmp_path / "out"
    harness.run(
        config(tmp_path, tiny_llama, data_dir, out, subsamples=1, conditions=["base", "extra", "test"])
    )
    unit = out / TINY_GRID_DIR / "units" / "0.json"
    manifest = out / MODEL_DIR / "manifest-shard0of1.json"
    before = manifest.read_bytes(), unit.read_bytes()
    changed = config(
        tmp_path, tiny_llama, data_dir, out, subsamples=1, epochs=2, conditions=["base", "extra", "test"]
    )
    with pytest.raises(SystemExit) as err:
        main(["run", "--config", str(changed), "--no-summary"])
    message = str(err.value)
    assert "holds 1 finished unit(s) made with other settings" in message and "epochs: 1.0 -> 2.0" in message
    assert "new `out`" in message and "--overwrite" in message
    assert (manifest.read_bytes(), unit.read_bytes()) == before  # nothing rewritten by the refused start
    main(["run", "--config", str(changed), "--no-summary", "--overwrite"])
    assert json.loads(unit.read_text())["settings"]["epochs"] == 2.0
    assert json.loads(manifest.read_text())["config"]["method_settings"] == {
        "prompt-tapt": {"lr": 0.01, "batch_size": 4, "epochs": 2}
    }
    main(["run", "--config", str(changed), "--no-summary"])  # same settings now: nothing to redo
    assert any("0 units to run of 1" in p.read_text() for p in (out / MODEL_DIR / "logs").glob("*.log"))
    before = manifest.read_bytes(), unit.read_bytes()
    with pytest.raises(SystemExit, match="made with other settings"):  # workers: the same check, once
        main(
            [
                "run",
                "--config",
                str(config(tmp_path, tiny_llama, data_dir, out, subsamples=1)),
                "--workers",
                "2",
            ]
        )
    assert (manifest.read_bytes(), unit.read_bytes()) == before


@pytest.mark.xdist_group("lm_eval_index")  # lm-eval's own task index: built once, in one worker
def test_config_errors(tmp_path, tiny_llama, data_dir):
    with pytest.raises(TaskError, match="a.yaml: unknown task 'nope'"):
        load_run(config(tmp_path, tiny_llama, data_dir, tmp_path / "a", tasks=["nope"]))
    with pytest.raises(
        TaskError, match="task 'climate_fever': m \\+ 2n = 4 \\+ 2\\*1000 = 2004 exceeds the pool of 300"
    ):
        load_run(config(tmp_path, tiny_llama, data_dir, tmp_path / "b", tasks=["climate_fever"], n=1000))
    bad = config(tmp_path, tiny_llama, data_dir, tmp_path / "c", subsample=3)
    with pytest.raises(
        SettingsError,
        match=f"^{re.escape(str(bad))}: unknown key\\(s\\) \\['subsample'\\] "
        "\\('subsample': did you mean 'subsamples'\\?\\)",
    ):
        load_run(bad)  # the file named once, the key spelled close to it named
    misspelt = "table1_minlm: cannot read the config .*did you mean 'table1_minilm'"
    with pytest.raises(SettingsError, match=misspelt):
        load_run("table1_minlm")  # a shipped config's name, misspelt
    older = config(tmp_path, tiny_llama, data_dir, tmp_path / "e", epochz=2)  # the method's key, misspelt
    with pytest.raises(
        SettingsError, match="\\('epochz': did you mean 'epochs'\\?\\): prompt-tapt's settings go under"
    ):
        load_run(older)
    with pytest.raises(SystemExit, match="--shard must look like i/N"):
        main(["run", "--config", str(config(tmp_path, tiny_llama, data_dir, tmp_path / "d")), "--shard", "2"])
    with pytest.raises(
        SettingsError,
        match="x.yaml: key 'conditions' must be base, extra, test and optionally leak, stream, "
        "got \\['base', 'test', 'leak'\\]",
    ):
        load_run(config(tmp_path, tiny_llama, data_dir, tmp_path / "x", conditions=["base", "test", "leak"]))
    with pytest.raises(SettingsError, match="y.yaml: key 'exposure' n = 2: a permutation test of 2 test"):
        load_run(config(tmp_path, tiny_llama, data_dir, tmp_path / "y", n=2))
    with pytest.raises(UserError, match="z.yaml: key 'base': base model '/no/such-model' not found"):
        load_run(config(tmp_path, tiny_llama, data_dir, tmp_path / "z", base="/no/such-model"))
    assert not (tmp_path / "z").exists()  # refused before anything is written


def test_a_config_that_cannot_run_is_refused_naming_the_key_or_flag_before_anything_is_written(
    tmp_path, tiny_llama, tiny_bert, data_dir
):
    with pytest.raises(SettingsError, match="e.yaml: key 'tasks' is empty: name at least one task"):
        load_run(config(tmp_path, tiny_llama, data_dir, tmp_path / "e", tasks=[]))
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(SettingsError, match="file.yaml: key 'out' .*file is a file, not a folder"):
        load_run(config(tmp_path, tiny_llama, data_dir, tmp_path / "file"))
    with pytest.raises(SettingsError, match="g.yaml: key 'base': .* is an encoder, and the zero_shot flow"):
        load_run(config(tmp_path, tiny_llama, data_dir, tmp_path / "g", base=str(tiny_bert)))
    cfg = config(tmp_path, tiny_llama, data_dir, tmp_path / "h")
    with pytest.raises(SystemExit, match="--base: base model 'no/such-model' not found"):
        main(["run", "--config", str(cfg), "--base", "no/such-model"])
    assert not any((tmp_path / d).exists() for d in "egh")


def test_a_shipped_config_without_data_offline_names_the_data_dir_fix(monkeypatch, tmp_path):
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.delenv("TAPT_BENCH_DATA_DIR", raising=False)
    monkeypatch.setattr(datasets, "load_dataset", offline)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as err:
        main(["run", "--config", "demo", "--no-summary"])
    assert "--data-dir DIR" in str(err.value) and "TAPT_BENCH_DATA_DIR" in str(err.value)
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_sigkill_mid_unit_then_rerun_equals_uninterrupted(tiny_grid, tmp_path, tiny_llama, data_dir):
    cfg = config(tmp_path, tiny_llama, data_dir, tmp_path / "killed")
    cmd = [sys.executable, "-m", "harness.cli", "run", "--config", str(cfg), "--no-summary"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    units = tmp_path / "killed" / TINY_GRID_DIR / "units"
    logs = tmp_path / "killed" / MODEL_DIR / "logs"
    deadline = time.time() + 300
    while (
        time.time() < deadline and proc.poll() is None
    ):  # until unit 1 is half done: its extra adapter trained
        if any("ag_news subsample 1: train_extra done" in p.read_text() for p in logs.glob("*.log")):
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = sorted(p.name for p in units.glob("*.json"))
    assert "0.json" in done and len(done) < 3, done
    assert len(pd.read_csv(units.parent / "accuracies.csv")) == len(done)
    harness.run(cfg)  # the same command resumes; here in this process, saving a start-up
    for got, want in zip(grid_tables(tmp_path / "killed"), grid_tables(tiny_grid)):
        pd.testing.assert_frame_equal(got, want)


def ctrl_c_as_in_a_shell():
    """The child as a terminal starts it: SIGINT handled and not blocked. A child inherits an ignored or
    blocked SIGINT from the process that starts it, and in the full default tier the child of this test
    process once ran to its end through the signal (exit 0)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@pytest.mark.slow
def test_ctrl_c_mid_run_ends_in_one_line_with_exit_130_and_keeps_the_finished_units(
    tmp_path, tiny_llama, data_dir
):
    cfg = config(tmp_path, tiny_llama, data_dir, tmp_path / "interrupted")
    cmd = [sys.executable, "-m", "harness.cli", "run", "--config", str(cfg), "--no-summary"]
    stderr = tmp_path / "stderr.txt"
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=stderr.open("w"), preexec_fn=ctrl_c_as_in_a_shell
    )
    logs = tmp_path / "interrupted" / MODEL_DIR / "logs"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:  # mid-unit: unit 1's extra adapter trained
        if any("ag_news subsample 1: train_extra done" in p.read_text() for p in logs.glob("*.log")):
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)
    err = stderr.read_text()
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and err.rstrip().splitlines()[-1].startswith("tapt-bench: interrupted;")
    done = sorted(p.name for p in (tmp_path / "interrupted" / TINY_GRID_DIR / "units").glob("*.json"))
    assert done == ["0.json"]


@pytest.mark.slow
def test_ctrl_c_while_the_libraries_load_ends_in_one_line_and_writes_nothing(tmp_path, tiny_llama, data_dir):
    cfg = config(tmp_path, tiny_llama, data_dir, tmp_path / "early")
    cmd = [sys.executable, "-m", "harness.cli", "run", "--config", str(cfg), "--no-summary"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_as_in_a_shell
    )
    maps = Path(f"/proc/{proc.pid}/maps")
    deadline = time.time() + 120  # torch's import takes seconds after its library is mapped, on any host
    while time.time() < deadline and proc.poll() is None and "libtorch" not in maps.read_text():
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and err.rstrip().splitlines()[-1].startswith("tapt-bench: interrupted;")
    assert not (tmp_path / "early").exists()


@pytest.mark.slow
def test_a_run_ends_with_the_seconds_of_each_stage_summed_over_its_units(
    tmp_path, tiny_llama, data_dir, capsys
):
    out = tmp_path / "out"
    harness.run(config(tmp_path, tiny_llama, data_dir, out, subsamples=2))
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("seconds by stage"))
    records = [json.loads(p.read_text())["seconds"] for p in (out / TINY_GRID_DIR / "units").glob("*.json")]
    train_extra = sum(r["train_extra"] for r in records)
    assert line.startswith("seconds by stage over 2 unit(s), ")
    for stage in ("score", "exposure", "train"):
        total = sum(s for r in records for name, s in r.items() if name.startswith(stage + "_"))
        assert f" {stage} {total:.0f}" in line, line
    assert f"(extra {train_extra:.0f}, test " in line and "other " in line
    capsys.readouterr()
    harness.run(config(tmp_path, tiny_llama, data_dir, out, subsamples=2))  # nothing to run
    assert "seconds by stage" not in capsys.readouterr().out


def test_merge_refuses_a_unit_whose_record_was_deleted_naming_it(tiny_grid, tmp_path):
    """A shard's unit table left without its record (its .json deleted): merge says so and writes nothing,
    where it merged the rest and dropped that unit with only 'merged'."""
    shard = tmp_path / "shard"
    shutil.copytree(tiny_grid, shard)
    (shard / TINY_GRID_DIR / "units" / "1.json").unlink()
    with pytest.raises(UserError, match=r"1 unit table\(s\) without their record \(e.g. .*units/1.parquet\)"):
        merge([shard], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_merge_refuses_shards_that_read_two_versions_of_a_data_file(tiny_grid, tmp_path):
    """Two shards of one config, the data file replaced between them: every setting matches and each
    unit's rows differ between subsamples anyway, so only the pool's hash tells them apart. Merge refuses,
    as a rerun into one folder does, and writes nothing; where it pooled them with only 'merged'."""
    odd = tmp_path / "odd"
    shutil.copytree(tiny_grid, odd)
    for k in (0, 2):  # the odd shard's units 0 and 2 read the other version
        (odd / TINY_GRID_DIR / "units" / f"{k}.json").unlink()
        (odd / TINY_GRID_DIR / "units" / f"{k}.parquet").unlink()
    unit = odd / TINY_GRID_DIR / "units" / "1.json"
    record = json.loads(unit.read_text())
    assert len(record["inputs"]["pool"]) == 16  # recorded by the run
    record["inputs"] = {**record["inputs"], "pool": "0123456789abcdef", "rows": "fedcba9876543210"}
    unit.write_text(json.dumps(record))
    shard0 = tmp_path / "shard0"
    shutil.copytree(tiny_grid, shard0)
    (shard0 / TINY_GRID_DIR / "units" / "1.json").unlink()
    (shard0 / TINY_GRID_DIR / "units" / "1.parquet").unlink()
    with pytest.raises(UserError, match=r"read other content \(the task's documents \(its data file was"):
        merge([shard0, odd], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()
