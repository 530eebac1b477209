"""`tapt-bench run --ray`: the same results as a plain run, nothing lost or doubled when a worker dies."""

import os
import re
import signal
import sys
import threading
import time

import pandas as pd
import pytest
from helpers import grid_tables
from helpers import tiny_grid_config as config

import harness
from harness.cli.main import main
from harness.grid.configuration import config as grid_config


def sorted_tables(out):
    acc, probs = grid_tables(out)
    return acc, probs.sort_values(["subsample", "condition", "row"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False)  # forwards the workers' log lines to the run log
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_run_equals_the_plain_run(ray_local, tiny_grid, tmp_path, tiny_llama, data_dir):
    on_ray = config(tmp_path, tiny_llama, data_dir, tmp_path / "ray")
    main(["run", "--config", str(on_ray), "--no-summary", "--ray", "--cpus-per-unit", "1"])
    (acc, probs), (ray_acc, ray_probs) = sorted_tables(tiny_grid), sorted_tables(tmp_path / "ray")
    assert len(acc) == 3 and len(probs) == 3 * 4 * 6
    pd.testing.assert_frame_equal(ray_acc, acc)
    pd.testing.assert_frame_equal(ray_probs, probs)


def running_unit_pid(logs, timeout: float = 300) -> int:
    """The pid of a Ray worker running a unit, from the line it logs on start (which Ray forwards to
    the driver's run log)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for path in logs.glob("*.log"):
            found = re.search(r"start in worker pid (\d+)", path.read_text())
            if found:
                return int(found.group(1))
        time.sleep(0.05)
    raise AssertionError("no unit started on Ray within the timeout")


@pytest.mark.slow
def test_a_worker_killed_mid_unit_is_retried_and_each_unit_written_once(
    ray_local, tmp_path, tiny_llama, data_dir
):
    # long units (10 epochs), so that the kill lands while the first one runs
    cfg = grid_config.load_config(
        config(
            tmp_path,
            tiny_llama,
            data_dir,
            tmp_path / "fault",
            subsamples=2,
            epochs=10.0,
            conditions=["base", "extra", "test"],
        )
    )
    failure = []

    def drive():
        try:
            harness.run(cfg, ray=True)
        except BaseException as err:  # reported below, in the test's thread
            failure.append(err)

    driver = threading.Thread(target=drive)
    driver.start()
    logs = tmp_path / "fault/m4/n6/tiny/logs"
    pid = running_unit_pid(logs)
    os.kill(pid, signal.SIGKILL)  # mid-unit: it logged its start and trains for several seconds
    driver.join(timeout=600)
    assert not driver.is_alive() and not failure, failure
    acc, probs = sorted_tables(tmp_path / "fault")
    assert len(acc) == 2 and sorted(probs["subsample"].unique()) == [0, 1]
    assert probs.groupby(["subsample", "condition"]).size().eq(6).all()  # each unit's rows once
    text = "".join(p.read_text() for p in logs.glob("*.log"))
    starts = re.findall(r"(\w+) subsample (\d+): start in worker pid (\d+)", text)
    killed = [(slug, k) for slug, k, p in starts if int(p) == pid]
    assert len(killed) == 1, starts  # the killed worker was in its first unit
    assert [(slug, k) for slug, k, _ in starts].count(killed[0]) == 2, starts  # which Ray started again

    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "fault").rglob("units/*")}
    harness.run(cfg, ray=True)
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "fault").rglob("units/*")} == before


def test_without_ray_the_flag_names_the_extra(tmp_path, tiny_llama, data_dir, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    cfg = config(tmp_path, tiny_llama, data_dir, tmp_path / "none")
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--config", str(cfg), "--ray"])
    assert "pip install -e '.[ray]'" in str(exit_.value)
    assert not (tmp_path / "none").exists()


def test_ray_flags_need_ray(tmp_path, tiny_llama, data_dir):
    cfg = config(tmp_path, tiny_llama, data_dir, tmp_path / "x")
    with pytest.raises(SystemExit, match="--address, --gpus-per-unit: used only with --ray"):
        main(["run", "--config", str(cfg), "--address", "auto", "--gpus-per-unit", "1"])
    with pytest.raises(SystemExit, match="--workers and --ray"):
        main(["run", "--config", str(cfg), "--ray", "--workers", "2"])
    assert not (tmp_path / "x").exists()
