"""`--workers`: units in worker processes write the records one process writes, bit for bit; `auto` sizes
the workers from the first unit's measured GPU memory; a unit that runs out of memory is retried on the
workers left; a worker that dies stops the run naming its unit."""

import json
import logging

import pandas as pd
import pytest
from helpers import tiny_grid_config, without_times

import harness
from harness.cli.main import main
from harness.core.engine import threads
from harness.grid.execution import pool
from harness.grid.execution.on_ray import gpu_fraction
from harness.grid.execution.pool import Pool, fits
from harness.grid.execution.worker_messages import Memory


def records(out):
    units = sorted(out.rglob("units/*.json"))
    return {
        p.relative_to(out): (
            without_times(json.loads(p.read_text())),
            pd.read_parquet(p.with_suffix(".parquet")),
        )
        for p in units
    }


@pytest.mark.slow
def test_two_workers_write_the_records_of_one_process_bit_for_bit(tmp_path, tiny_llama, data_dir):
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, tmp_path / "one", tasks=["ag_news", "rotten_tomatoes"]
    )
    harness.run(config, threads=1)
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, tmp_path / "two", tasks=["ag_news", "rotten_tomatoes"]
    )
    main(["run", "--config", str(config), "--workers", "2", "--threads", "1", "--no-summary"])
    one, two = records(tmp_path / "one"), records(tmp_path / "two")
    assert len(one) == 6 and one.keys() == two.keys()
    for name in one:
        assert one[name][0] == two[name][0], name  # accuracies, moved norms, losses, exposure: every key
        pd.testing.assert_frame_equal(one[name][1], two[name][1], check_exact=True)  # every probability
    (log,) = (tmp_path / "two").rglob("logs/*.log")
    assert "start in worker 1" in log.read_text()  # both workers ran units
    assert [p.name for p in (tmp_path / "two").rglob("manifest-*.json")] == ["manifest-shard0of1.json"]


def test_what_fits_is_the_smaller_of_the_memory_and_half_the_cores():
    assert fits(14.5, 139.8, cores=16) == (8, 8, 8)  # an H200: the cores bind
    assert fits(14.5, 79.6, cores=16) == (4, 4, 8)  # an H100: the memory binds, 10% of it kept free
    assert fits(14.5, 79.6, cores=16, gpus=2) == (8, 8, 8)
    assert fits(100.0, 79.6, cores=2) == (1, 1, 1)  # never fewer than one
    assert gpu_fraction(Memory(peak=14.0, outside=0.5, total=79.6, name="H100")) == 0.25


def test_auto_starts_as_many_workers_as_the_first_units_memory_allows_then_retires_one_for_a_larger_unit(
    monkeypatch, caplog
):
    monkeypatch.setattr(threads, "cores", lambda: 16)
    started, retired = [], []
    workers = Pool(None)
    monkeypatch.setattr(
        workers,
        "start",
        lambda n: started.append(n) or workers.procs.update({len(workers.procs) + i: None for i in range(n)}),
    )
    monkeypatch.setattr(workers, "retire", lambda i: retired.append(i) or workers.procs.pop(i))
    workers.procs = {0: None}  # the first worker, which ran the first unit alone
    with caplog.at_level(logging.INFO, logger="tapt_bench.grid"):
        workers.account(0, Memory(peak=10.0, outside=1.0, total=80.0, name="GPU"), left=30)
        assert started == [5] and len(workers.procs) == 6  # floor(72 / 11) = 6 units in flight
        assert "11.0 GiB of 80.0 (GPU): 6 units in flight (memory for 6, cores for 8)" in caplog.text
        assert "multi-process service is not running" in caplog.text
        workers.account(3, Memory(peak=10.5, outside=None, total=80.0, name="GPU"), left=20)
        assert retired == []  # 11.5 GiB: still 6
        workers.account(4, Memory(peak=13.5, outside=None, total=80.0, name="GPU"), left=20)
        assert retired == [4] and len(workers.procs) == 5  # 14.5 GiB: 4 fit, one worker fewer a unit
    assert "14.5 GiB: 4 workers from now on" in caplog.text


def test_auto_starts_no_more_workers_than_units_left(monkeypatch):
    monkeypatch.setattr(threads, "cores", lambda: 16)
    workers, started = Pool(None), []
    monkeypatch.setattr(workers, "start", started.append)
    workers.procs = {0: None}
    workers.account(0, Memory(peak=1.0, outside=0.0, total=80.0, name="GPU"), left=2)
    assert started == [2]


def test_a_fixed_count_is_not_resized(monkeypatch):
    workers, started = Pool(3), []
    monkeypatch.setattr(workers, "start", started.append)
    workers.account(0, Memory(peak=70.0, outside=1.0, total=80.0, name="GPU"), left=5)
    assert started == [] and workers.size == 3


def test_the_mps_note_says_whether_the_service_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path))
    assert "is not running" in pool.mps_note()
    (tmp_path / "control").touch()
    assert "is running" in pool.mps_note()


OOM_ONCE = """
import os
from harness.api import Adapted, Inputs, Method, Settings
import torch

def adapt(x: Inputs) -> Adapted:
    try:  # the first call anywhere runs out of memory
        os.close(os.open(os.environ["OOM_MARK"], os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return Adapted(x.model, {"learned_from": len(x.docs)})
    raise torch.OutOfMemoryError("CUDA out of memory (planted)")

METHOD = Method("oom-once", ("zero_shot",), Settings, adapt, "runs out of memory once")
"""

DIES = """
import os
from harness.api import Adapted, Inputs, Method, Settings

def adapt(x: Inputs) -> Adapted:
    os._exit(3)

METHOD = Method("dies", ("zero_shot",), Settings, adapt, "its process dies")
"""


@pytest.mark.slow
def test_a_unit_out_of_memory_is_retried_on_the_workers_left(tmp_path, tiny_llama, data_dir, monkeypatch):
    (tmp_path / "oom.py").write_text(OOM_ONCE)
    monkeypatch.setenv("OOM_MARK", str(tmp_path / "mark"))
    config = tiny_grid_config(
        tmp_path,
        tiny_llama,
        data_dir,
        tmp_path / "out",
        method=f"{tmp_path / 'oom.py'}:METHOD",
        exposure=False,
        subsamples=2,
    )
    main(["run", "--config", str(config), "--workers", "2", "--threads", "1", "--no-summary"])
    assert len(list((tmp_path / "out").rglob("units/*.json"))) == 2
    (log,) = (tmp_path / "out").rglob("logs/*.log")
    assert "ran out of GPU memory: retried with 1 workers" in log.read_text()


@pytest.mark.slow
def test_a_worker_that_dies_stops_the_run_naming_its_unit(tmp_path, tiny_llama, data_dir):
    (tmp_path / "dies.py").write_text(DIES)
    config = tiny_grid_config(
        tmp_path,
        tiny_llama,
        data_dir,
        tmp_path / "out",
        method=f"{tmp_path / 'dies.py'}:METHOD",
        exposure=False,
        subsamples=2,
    )
    with pytest.raises(SystemExit, match=r"the worker computing ag_news subsample \d died \(exit code 3\)"):
        main(["run", "--config", str(config), "--workers", "2", "--threads", "1", "--no-summary"])
    assert not list((tmp_path / "out").rglob("units/*.json"))


def test_workers_and_gpu_shares_take_auto_or_a_number(tmp_path, tiny_llama, data_dir):
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out")
    with pytest.raises(SystemExit, match="--workers must be auto or a whole number >= 1, got '0'"):
        main(["run", "--config", str(config), "--workers", "0"])
    with pytest.raises(SystemExit, match="--gpus-per-unit must be auto or a number >= 0, got 'half'"):
        main(["run", "--config", str(config), "--ray", "--gpus-per-unit", "half"])
    assert not (tmp_path / "out").exists()
