"""A run is planned once: a config is a value (no I/O), the plan resolves each cell, method and unit once,
and a unit reads its settings from its plan, never from the config again."""

import sys
from pathlib import Path

import pytest
from helpers import tiny_grid_config

from harness.core.plumbing.errors import SettingsError
from harness.grid.configuration import config as grid_config
from harness.grid.configuration import plan, resolve
from harness.grid.configuration.config import GridConfig, load_config
from harness.grid.unit import flow
from harness.grid.unit.unit_plan import UnitKey

CONFIG_PY = str(Path(grid_config.__file__))


def calls_into_config(work) -> dict[str, int]:
    """The functions of harness/grid/configuration/config.py that `work()` calls, and how often."""
    calls: dict[str, int] = {}

    def seen(frame, event, arg):
        if event == "call" and frame.f_code.co_filename == CONFIG_PY:
            calls[frame.f_code.co_name] = calls.get(frame.f_code.co_name, 0) + 1

    sys.setprofile(seen)
    try:
        work()
    finally:
        sys.setprofile(None)
    return calls


def test_a_config_is_a_value_and_the_run_checks_what_needs_the_disk_or_a_plug_in_once(tmp_path):
    missing = str(tmp_path / "nowhere.py") + ":METHOD"
    cfg = GridConfig(out="/proc/x", method=missing)  # built: a config probes no folder, loads no file
    with pytest.raises(SettingsError, match="out .*cannot"):
        plan.run_plans(cfg)
    with pytest.raises(SettingsError, match="nowhere.py"):
        plan.run_plans(cfg.replace(out=str(tmp_path / "out")))


def test_a_config_of_two_cells_and_three_methods_is_resolved_into_six_cells_building_each_config_once():
    cfg = GridConfig(cells=["4/6/1", "4/8/1"], methods=["prompt-tapt", "self-training", "test-time-rl"])
    built = calls_into_config(lambda: plan.run_plans(cfg))["complete"]
    cells = plan.run_plans(cfg)
    assert [(c.config.sample.n, c.method.name) for c in cells] == [
        (n, m) for n in (6, 8) for m in ("prompt-tapt", "self-training", "test-time-rl")
    ]
    assert built == 2 + 2 * 3  # a config per cell, then one per cell and method: no config re-expanded
    assert {c.tag for c in cells} == {
        "SmolLM2-135M-Instruct",
        *(f"SmolLM2-135M-Instruct+{m}" for m in ("self-training", "test-time-rl")),
    }


def test_a_unit_reads_its_settings_from_its_plan_and_never_from_the_config(
    tmp_path, tiny_llama, data_dir, monkeypatch
):
    cfg = load_config(
        tiny_grid_config(
            tmp_path,
            tiny_llama,
            data_dir,
            tmp_path / "out",
            subsamples=1,
            conditions=["base", "extra", "test"],
        )
    )
    unit = plan.run_plans(cfg)[0].unit(UnitKey("ag_news", 0))
    settings = unit.method_settings
    assert (*unit.key, settings.lr, settings.batch_size) == ("ag_news", 0, 0.01, 4)
    assert unit.folder == tmp_path / "out/m4/n6/tiny/ag_news" and unit.settings_hash == resolve.settings_hash(
        cfg
    )
    found, find = [], plan.find_spec
    monkeypatch.setattr(plan, "find_spec", lambda *a: found.append(a) or find(*a))
    again = plan.run_plans(cfg.replace(subsamples=3))[0]
    assert [p.spec.slug for p in again.units()] == ["ag_news"] * 3
    assert len(found) == 1  # the task found once for the run, not once per unit
    done = {}
    calls = calls_into_config(lambda: done.setdefault("unit", flow.compute(unit)))
    assert calls == {}  # no settings read back from config.py while the unit computes
    assert done["unit"].record["settings_hash"] == resolve.settings_hash(cfg)


def test_tapt_bench_run_checks_the_run_once_and_plans_each_cell_once(
    tmp_path, tiny_llama, data_dir, monkeypatch
):
    from helpers import no_units

    from harness.cli.main import main
    from harness.grid.configuration import run_checks

    checked, planned = [], []
    check_run, run_plan = run_checks.check_run, plan.run_plan
    monkeypatch.setattr(run_checks, "check_run", lambda cfg: checked.append(cfg) or check_run(cfg))
    monkeypatch.setattr(plan, "run_plan", lambda cfg: planned.append(cfg) or run_plan(cfg))
    no_units(monkeypatch)
    path = tiny_grid_config(
        tmp_path,
        tiny_llama,
        data_dir,
        tmp_path / "out",
        methods=["prompt-tapt", "self-training"],
        subsamples=1,
    )
    main(["run", "--config", str(path), "--no-summary"])
    assert (len(checked), len(planned)) == (1, 2)


def test_a_run_reads_its_older_keys_its_task_index_and_each_method_once(
    tmp_path, tiny_llama, data_dir, monkeypatch
):
    """The lookups a run needs once: the config's older spellings read, the task YAMLs parsed into their
    index, each method found (a file plug-in's top-level code is run by finding it)."""
    from helpers import no_units

    from harness.cli.main import main
    from harness.grid.configuration import study_layout
    from harness.tasks import spec
    from tapt import methods

    read, found, recorded = [], [], []
    read_old_keys, find, record = study_layout.read_old_keys, methods.find, resolve.recorded
    monkeypatch.setattr(study_layout, "read_old_keys", lambda *a: read.append(a) or read_old_keys(*a))
    monkeypatch.setattr(resolve, "recorded", lambda cfg, *a: recorded.append(cfg) or record(cfg, *a))
    monkeypatch.setattr(methods, "find", lambda name: found.append(name) or find(name))
    no_units(monkeypatch)
    spec.task_names.cache_clear()
    spec.parsed.cache_clear()
    path = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out", subsamples=1)
    main(["run", "--config", str(path), "--no-summary"])
    assert len(read) == 1 and len(recorded) == 1  # the settings units record: once for the one cell
    assert spec.task_names.cache_info().misses == 1  # the shipped task folder's YAMLs, indexed once
    # each YAML parsed once, and the template every shipped task includes once, not once per task
    assert spec.parsed.cache_info().misses == len(list(spec.TASKS_DIR.glob("*.yaml"))) + 1
    # the run's method: by the commands' flags, by the run's checks, by its plan (a config holds no found
    # method); the older keys' reader and the task keys' check each ask for both flows' default methods
    assert sorted(set(found)) == ["prompt-tapt", "raw-text"] and len(found) <= 9, found


def test_a_worker_computes_the_unit_plan_it_is_sent_and_builds_no_run_plan_nor_config(
    tmp_path, tiny_llama, data_dir, monkeypatch
):
    """The plan travels as it is: the worker (pool.serve, here in this process) unpickles a Job and
    computes its unit without building a run plan or a config and without reading a config file."""
    import logging
    import os
    import pickle
    import queue

    from harness.core.plumbing.sections import Sections
    from harness.grid.execution import pool, worker_messages

    cfg = load_config(
        tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out", subsamples=1, exposure=False)
    )
    (unit,) = plan.run_plan(cfg).units()
    jobs, done = queue.Queue(), queue.Queue()
    jobs.put(
        pickle.loads(pickle.dumps(worker_messages.Job(unit, False, 1, None, True)))
    )  # as the queue carries it
    jobs.put(None)
    counted = {"run plans": 0, "configs": 0, "config files": 0}

    def counting(name, work):
        return lambda *a, **k: counted.__setitem__(name, counted[name] + 1) or work(*a, **k)

    monkeypatch.setattr(plan, "run_plan", counting("run plans", plan.run_plan))
    monkeypatch.setattr(plan.RunPlan, "__init__", counting("run plans", plan.RunPlan.__init__))
    monkeypatch.setattr(Sections, "__init__", counting("configs", Sections.__init__))
    monkeypatch.setattr(grid_config, "load_config", counting("config files", grid_config.load_config))
    monkeypatch.setattr(grid_config, "config_path", counting("config files", grid_config.config_path))
    handlers = list(pool.log.handlers)
    try:
        pool.serve(0, jobs, done, parent=os.getppid())  # its parent-watching thread then only waits
    finally:
        pool.log.handlers[:] = handlers
        logging.getLogger("tapt_bench.grid").setLevel(logging.NOTSET)
    reply = done.get_nowait()
    assert isinstance(reply, worker_messages.Done), getattr(reply, "trace", reply)
    assert reply.record.key == ("ag_news", 0) and reply.record.record["settings_hash"] == unit.settings_hash
    assert counted == {"run plans": 0, "configs": 0, "config files": 0}


def test_a_tasks_pool_is_read_once_a_run_for_the_hash_and_majority_every_unit_records(
    tmp_path, tiny_llama, data_dir, monkeypatch
):
    """Every unit of a task records the same pool hash and majority share: the run reads the pool for
    them once a task, where each unit read it twice more (seconds a unit on a hub-sized pool), and only
    for the tasks whose units it will compute (a resumed run with nothing left reads none)."""
    from harness.grid.unit import fingerprints
    from harness.tasks.protocol import find_spec

    path = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, tmp_path / "out", tasks=["ag_news", "rotten_tomatoes"]
    )
    (run,) = plan.run_plans(load_config(path))
    hashed, pool = [], fingerprints.pool
    monkeypatch.setattr(
        fingerprints, "pool", lambda spec, sample: hashed.append(spec.slug) or pool(spec, sample)
    )
    units = run.units()
    assert len(units) == 6 and hashed == []  # 3 subsamples a task; planning reads no pool
    assert [p.pool is None for p in run.pooled(list(units[:3]))] == [False] * 3 and hashed == ["ag_news"]
    hashed.clear()
    units = run.pooled(list(units))
    assert sorted(hashed) == ["ag_news", "rotten_tomatoes"]
    spec = find_spec("ag_news")
    assert units[0].pool == (pool(spec, units[0].sample), spec.pool_majority(units[0].sample))
    assert units[0].pool == units[2].pool != units[3].pool
