"""The grid: killed and resumed runs, shards and merge, and config errors."""

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from conftest import grid_tables, tiny_grid_config as config
from harness.grid import config as grid_config
from harness.grid import run as grid_run
from harness.cli.main import main
from harness.results import merge
from harness.core.errors import SettingsError, TaskError

TASK_DIR = "m4/n6/tiny/ag_news"


def tables(out):
    return grid_tables(out, TASK_DIR)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, tiny_llama, data_dir):
    tmp = tmp_path_factory.mktemp("grid")
    grid_run.run(grid_config.load_config(config(tmp, tiny_llama, data_dir, tmp / "full")))
    return tmp / "full"


def test_layout_and_rows(uninterrupted):
    acc, probs = tables(uninterrupted)
    assert list(acc.columns) == ["base", "extra", "test", "majority", "num_classes", "majority_all"]
    assert len(acc) == 3 and (acc["num_classes"] == 4).all() and (acc["majority_all"] == 0.25).all()
    assert len(probs) == 3 * 3 * 6 and set(probs["condition"]) == {"base", "extra", "test"}
    predicted = probs["probs"].map(lambda p: int(max(range(len(p)), key=p.__getitem__)))
    assert probs["probs"].map(len).eq(4).all() and (predicted == probs["label"]).eq(probs["correct"]).all()
    per_condition = probs.groupby(["subsample", "condition"])["correct"].mean().unstack()
    assert per_condition[["base", "extra", "test"]].to_numpy() == pytest.approx(acc[["base", "extra", "test"]].to_numpy())
    assert (acc[["extra", "test"]] * 6).round(6).mod(1).eq(0).all().all()
    manifest = json.loads((uninterrupted / "m4/n6/tiny/manifest-shard0of1.json").read_text())
    assert manifest["finished_units"] == [["ag_news", 0], ["ag_news", 1], ["ag_news", 2]]
    assert list((uninterrupted / "m4/n6/tiny/logs").glob("run-*.log"))


def test_sigkill_mid_unit_then_rerun_equals_uninterrupted(uninterrupted, tmp_path, tiny_llama, data_dir):
    cfg = config(tmp_path, tiny_llama, data_dir, tmp_path / "killed")
    cmd = [sys.executable, "-m", "harness.cli.main", "run", "--config", str(cfg), "--no-summary"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = tmp_path / "killed" / TASK_DIR / "units" / "0.json"
    logs = tmp_path / "killed" / "m4/n6/tiny/logs"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:  # until unit 1 is half done: its extra adapter trained
        if any("ag_news subsample 1: train_extra done" in p.read_text() for p in logs.glob("*.log")):
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = sorted(p.name for p in first.parent.glob("*.json"))
    assert "0.json" in done and len(done) < 3, done
    assert len(pd.read_csv(first.parent.parent / "accuracies.csv")) == len(done)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for got, want in zip(tables(tmp_path / "killed"), tables(uninterrupted)):
        pd.testing.assert_frame_equal(got, want)


def test_two_shards_merge_to_the_unsharded_run(uninterrupted, tmp_path, tiny_llama, data_dir):
    cfg = grid_config.load_config(config(tmp_path, tiny_llama, data_dir, tmp_path / "s0"))
    assert [k for _, k in grid_run.units(cfg, (0, 2))] == [0, 2] and [k for _, k in grid_run.units(cfg, (1, 2))] == [1]
    grid_run.run(cfg, (0, 2))
    grid_run.run(grid_config.load_config(config(tmp_path, tiny_llama, data_dir, tmp_path / "s1")), (1, 2))
    merge([tmp_path / "s0", tmp_path / "s1"], tmp_path / "merged")
    for got, want in zip(tables(tmp_path / "merged"), tables(uninterrupted)):
        pd.testing.assert_frame_equal(got, want)


def test_a_rerun_with_other_settings_refuses_then_overwrite_recomputes(tmp_path, tiny_llama, data_dir, capsys):
    out = tmp_path / "out"
    grid_run.run(grid_config.load_config(config(tmp_path, tiny_llama, data_dir, out, subsamples=1)))
    unit = out / TASK_DIR / "units" / "0.json"
    manifest = out / "m4/n6/tiny/manifest-shard0of1.json"
    before = manifest.read_bytes(), unit.read_bytes()
    changed = config(tmp_path, tiny_llama, data_dir, out, subsamples=1, epochs=2)
    with pytest.raises(SystemExit) as err:
        main(["run", "--config", str(changed), "--no-summary"])
    message = str(err.value)
    assert "holds 1 finished unit(s) made with other settings" in message and "epochs: 1.0 -> 2.0" in message
    assert "new `out`" in message and "--overwrite" in message
    assert (manifest.read_bytes(), unit.read_bytes()) == before  # nothing rewritten by the refused start
    main(["run", "--config", str(changed), "--no-summary", "--overwrite"])
    assert json.loads(unit.read_text())["settings"]["epochs"] == 2.0
    assert json.loads(manifest.read_text())["config"]["epochs"] == 2.0
    main(["run", "--config", str(changed), "--no-summary"])  # same settings now: nothing to redo
    assert any("0 units to run of 1" in p.read_text() for p in (out / "m4/n6/tiny/logs").glob("*.log"))


def test_merge_refuses_shards_run_with_other_settings(uninterrupted, tmp_path):
    import shutil

    odd = tmp_path / "odd"
    shutil.copytree(uninterrupted, odd)
    unit = odd / TASK_DIR / "units" / "1.json"
    record = json.loads(unit.read_text())
    record["settings"]["lr"], record["settings_hash"] = 0.5, "0123456789abcdef"
    unit.write_text(json.dumps(record))
    with pytest.raises(SettingsError, match="cannot merge m4/n6/tiny: .* different settings:\n  lr: 0.01 -> 0.5"):
        merge([uninterrupted, odd], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_config_errors(tmp_path, tiny_llama, data_dir):
    with pytest.raises(TaskError, match="task 'nope': unknown task 'nope'"):
        grid_config.load_config(config(tmp_path, tiny_llama, data_dir, tmp_path / "a", tasks=["nope"]))
    with pytest.raises(TaskError, match="task 'climate_fever': m \\+ 2n = 4 \\+ 2\\*1000 = 2004 exceeds the pool of 1535"):
        grid_config.load_config(config(tmp_path, tiny_llama, data_dir, tmp_path / "b", tasks=["climate_fever"], n=1000))
    with pytest.raises(SettingsError, match="unknown key\\(s\\) \\['subsample'\\]"):
        grid_config.load_config(config(tmp_path, tiny_llama, data_dir, tmp_path / "c", subsample=3))
    with pytest.raises(SystemExit, match="--shard must look like i/N"):
        main(["run", "--config", str(config(tmp_path, tiny_llama, data_dir, tmp_path / "d")), "--shard", "2"])


def test_the_leak_condition_adds_its_column_probabilities_and_summary(tmp_path, tiny_llama, data_dir, capsys):
    out = tmp_path / "leak"
    main(["run", "--config", str(config(tmp_path, tiny_llama, data_dir, out, subsamples=2,
                                        conditions=["base", "extra", "test", "leak"]))])
    acc, probs = tables(out)
    assert list(acc.columns) == ["base", "extra", "test", "majority", "num_classes", "majority_all", "leak"]
    assert set(probs["condition"]) == {"base", "extra", "test", "leak"} and len(probs) == 2 * 4 * 6
    leak = probs[probs["condition"] == "leak"].groupby("subsample")["correct"].mean()
    assert leak.to_numpy() == pytest.approx(acc["leak"].to_numpy())
    unit = json.loads((out / TASK_DIR / "units" / "0.json").read_text())
    assert unit["training"]["leak"]["answers"] is True and unit["training"]["test"]["answers"] is False
    shown = capsys.readouterr().out
    assert "leak (leak-extra)" in shown and "leak/extra" in shown and "MDE" in shown
    assert "{'loss'" not in shown  # the Trainer's step dicts go to the run's log, not the terminal
    assert any("'loss'" in p.read_text() for p in (out / "m4/n6/tiny/logs").glob("*.log"))
    with pytest.raises(SettingsError, match="x.yaml: key 'conditions' must be base, extra, test and optionally leak, got \\['base', 'test', 'leak'\\]"):
        grid_config.load_config(config(tmp_path, tiny_llama, data_dir, tmp_path / "x", conditions=["base", "test", "leak"]))
