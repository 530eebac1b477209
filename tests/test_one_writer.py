"""Nothing lost, nothing mixed: one run per results folder and shard, no folder deleted that tapt-bench
did not write, and units of other settings never written beside a run's own."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
from helpers import tiny_grid_config

import harness
from harness import results
from harness.cli.main import main
from harness.core.plumbing.errors import SettingsError, UserError
from harness.grid.configuration import resolve
from harness.grid.configuration.config import load_config
from harness.grid.unit.unit_plan import UnitKey
from harness.grid.unit.unit_record import UnitRecord
from harness.results import lock
from tapt import output


def test_a_second_run_into_a_folder_and_shard_is_refused_naming_the_first(tmp_path, tiny_llama, data_dir):
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out", exposure=False)
    cfg = load_config(config)
    with lock.held(resolve.folder(cfg), (0, 1)):
        with pytest.raises(
            UserError, match=f"another run \\(PID {os.getpid()} on .*, started .*\\) is writing"
        ):
            harness.run(cfg)
        assert not list((tmp_path / "out").rglob("manifest*"))  # refused before anything is written
        overlap = pytest.raises(UserError, match="in 1 shard\\(s\\), and this run's shards are 2: the two")
        with (
            overlap,
            lock.held(resolve.folder(cfg), (1, 2)),
        ):  # shards of another count overlap this run's units
            pass
    deletes = pytest.raises(UserError, match="--overwrite would delete units beside it")
    with (
        lock.held(resolve.folder(cfg), (0, 2)),
        lock.held(resolve.folder(cfg), (1, 2)),
        deletes,
    ):  # shards of one count
        harness.run(cfg, overwrite=True)
    assert not results.lock_path(resolve.folder(cfg), (0, 1)).exists()  # given back when the run ends


def test_a_lock_whose_run_is_gone_is_taken_over_with_a_note(tmp_path, capsys):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    pid = int(gone.stdout)
    path = results.lock_path(tmp_path, (0, 1))
    import socket

    path.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "started": "2026-01-01 00:00:00"}))
    with lock.held(tmp_path, (0, 1)):
        assert json.loads(path.read_text())["pid"] == os.getpid()
    assert f"took over {path}: its run (PID {pid} on" in capsys.readouterr().err
    path.write_text(json.dumps({"pid": pid, "host": "another-machine", "started": "2026-01-01 00:00:00"}))
    refused = pytest.raises(
        UserError, match="another-machine.*if no run is writing there .*delete the lock file"
    )
    with refused, lock.held(tmp_path, (0, 1)):
        pass


def test_a_unit_is_not_written_beside_units_of_other_settings(tmp_path, tiny_llama, data_dir, monkeypatch):
    """Another run into the same --out, with other settings, writes unit 1 while this run computes unit 0
    (the executor here): unit 0 is refused, not written beside it."""
    import contextlib

    from harness.study import run_options

    cfg = load_config(tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out", exposure=False))
    tdir = results.task_dir(resolve.folder(cfg), "ag_news")
    mine, other = resolve.recorded(cfg), {"settings": {**resolve.recorded(cfg), "lr": 0.5}}

    @contextlib.contextmanager
    def racing(opts):
        def execute(pending, keep_adapters):
            results.write_unit(tdir, 1, {"base": 0.5}, pd.DataFrame({"row": [0]}), other)  # the other run
            yield UnitRecord(
                UnitKey("ag_news", 0), {"base": 0.5}, pd.DataFrame({"row": [0]}), {"settings": mine}
            )

        yield execute

    monkeypatch.setattr(run_options, "executor", racing)
    with pytest.raises(SettingsError, match="unit\\(s\\) \\[1\\] were written with other settings"):
        harness.run(cfg)
    assert not results.is_done(tdir, 0)


def test_overwrite_replaces_only_what_tapt_bench_wrote(tmp_path):
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "important.txt").write_text("x")
    refused = pytest.raises(UserError, match="a folder tapt-bench did not write \\(no tapt.json in it\\)")
    with refused, output.staged(victim, overwrite=True):
        pass
    assert (victim / "important.txt").read_text() == "x"
    ours = tmp_path / "ours"
    with output.staged(ours, overwrite=False) as tmp:
        output.write_record(tmp, {"kind": "adapter"})
    with output.staged(ours, overwrite=True) as tmp:
        output.write_record(tmp, {"kind": "model"})
    assert json.loads((ours / "tapt.json").read_text())["kind"] == "model"


def test_train_overwrite_of_a_foreign_folder_is_refused_before_the_base_loads(tmp_path, tiny_llama, data_dir):
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "important.txt").write_text("x")
    argv = ["train", "--task", "ag_news", "--n", "6", "--m", "4", "--quantize", "none"]
    argv += ["--base", str(tiny_llama), "--data-dir", str(data_dir), "--out", str(victim), "--overwrite"]
    with pytest.raises(SystemExit, match="--overwrite replaces only tapt-bench's own output"):
        main(argv)
    assert sorted(p.name for p in victim.iterdir()) == ["important.txt", "sub"]


def test_the_documents_lm_eval_scores_in_a_unit_are_the_units_own(
    tmp_path, tiny_llama, data_dir, monkeypatch
):
    """The tapt_* task's data hook draws the subsample again from its metadata: the unit checks that lm-eval
    scored its own test documents, row by row, and stops where a drift would score others."""
    from harness.grid.configuration import plan
    from harness.grid.unit import base_model, flow
    from harness.grid.unit.flows import zero_shot
    from harness.tasks.protocol import find_spec, subsample_docs

    cfg = load_config(tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out", exposure=False))
    unit = flow.compute(plan.run_plan(cfg).unit(UnitKey("ag_news", 0)))
    test = subsample_docs(find_spec("ag_news"), cfg.sample, 0)["test"]
    scored = unit.probs[unit.probs["condition"] == "base"]
    assert sorted(scored["row"]) == sorted(test["row"])
    drawn = zero_shot.scoring.lm_eval_task
    monkeypatch.setattr(  # the hook told another subsample than the grid drew
        zero_shot.scoring,
        "lm_eval_task",
        lambda spec, meta, inc, t: drawn(spec, {**meta, "subsample": 1}, inc, t),
    )
    base_model.BASE_SCORES.clear()
    with pytest.raises(
        UserError, match="lm-eval's doc 0 is pool row [0-9]+, and the unit's test document there is row"
    ):
        flow.compute(plan.run_plan(cfg.replace(out=str(tmp_path / "other"))).unit(UnitKey("ag_news", 0)))
