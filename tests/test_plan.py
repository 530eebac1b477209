"""A run is planned once: a config is a value (no I/O), the plan resolves each cell, method and unit once,
and a unit reads its settings from its plan, never from the config again."""

import sys
from pathlib import Path

import pytest
from helpers import tiny_grid_config

from harness.core.errors import SettingsError
from harness.grid import config as grid_config
from harness.grid import plan, resolve, units
from harness.grid.config import GridConfig, load_config

CONFIG_PY = str(Path(grid_config.__file__))


def calls_into_config(work) -> dict[str, int]:
    """The functions of harness/grid/config.py that `work()` calls, and how often."""
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
        plan.cells(cfg)
    with pytest.raises(SettingsError, match="nowhere.py"):
        plan.cells(cfg.replace(out=str(tmp_path / "out")))


def test_a_config_of_two_cells_and_three_methods_is_resolved_into_six_cells_building_each_config_once():
    cfg = GridConfig(cells=["4/6/1", "4/8/1"], methods=["prompt-tapt", "self-training", "test-time-rl"])
    built = calls_into_config(lambda: plan.cells(cfg))["complete"]
    cells = plan.cells(cfg)
    assert [(c.config.n, c.method.name) for c in cells] == [
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
    unit = plan.cells(cfg)[0].unit("ag_news", 0)
    assert (unit.slug, unit.k, unit.settings.lr, unit.settings.batch_size) == ("ag_news", 0, 0.01, 4)
    assert unit.folder == tmp_path / "out/m4/n6/tiny/ag_news" and unit.settings_hash == resolve.settings_hash(
        cfg
    )
    found, find = [], plan.find_spec
    monkeypatch.setattr(plan, "find_spec", lambda *a: found.append(a) or find(*a))
    again = plan.cells(cfg)[0]
    assert [again.unit("ag_news", k).inputs()[0].slug for k in (0, 1, 0)] == ["ag_news"] * 3
    assert len(found) == 1  # the task found once for the cell, not once per unit
    done = {}
    calls = calls_into_config(lambda: done.setdefault("unit", units.compute_unit(unit)))
    assert calls == {}  # no settings read back from config.py while the unit computes
    assert done["unit"].record["settings_hash"] == resolve.settings_hash(cfg)


def test_tapt_bench_run_checks_the_run_once_and_plans_each_cell_once(
    tmp_path, tiny_llama, data_dir, monkeypatch
):
    from harness.cli.main import main
    from harness.grid import run as grid_run
    from harness.grid import run_checks

    checked, planned = [], []
    check_run, cell = run_checks.check_run, plan.cell
    monkeypatch.setattr(run_checks, "check_run", lambda cfg: checked.append(cfg) or check_run(cfg))
    monkeypatch.setattr(plan, "cell", lambda cfg: planned.append(cfg) or cell(cfg))
    monkeypatch.setattr(grid_run, "in_process", lambda *a, **k: iter(()))  # no unit computed
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
    from harness.cli.main import main
    from harness.grid import run as grid_run
    from harness.grid import study_layout
    from harness.tasks import spec
    from tapt import methods

    read, found, recorded = [], [], []
    read_old_keys, find, record = study_layout.read_old_keys, methods.find, resolve.recorded
    monkeypatch.setattr(study_layout, "read_old_keys", lambda *a: read.append(a) or read_old_keys(*a))
    monkeypatch.setattr(resolve, "recorded", lambda cfg: recorded.append(cfg) or record(cfg))
    monkeypatch.setattr(methods, "find", lambda name: found.append(name) or find(name))
    monkeypatch.setattr(grid_run, "in_process", lambda *a, **k: iter(()))  # no unit computed
    spec.task_names.cache_clear()
    spec.parsed.cache_clear()
    path = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out", subsamples=1)
    main(["run", "--config", str(path), "--no-summary"])
    assert len(read) == 1 and len(recorded) == 1  # the settings units record: once for the one cell
    assert spec.task_names.cache_info().misses == 1  # the shipped task folder's YAMLs, indexed once
    # each YAML parsed once, and the template every shipped task includes once, not once per task
    assert spec.parsed.cache_info().misses == len(list(spec.TASKS_DIR.glob("*.yaml"))) + 1
    # the run's method once per config it plans (the file's, its cell's) and the task keys' check; the older
    # keys' reader and the task keys' check each ask for both flows' default methods
    assert sorted(set(found)) == ["prompt-tapt", "raw-text"] and len(found) <= 8, found
