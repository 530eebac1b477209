"""A flow is one file: a toy flow with a section of its own, named by its file in a config, runs a unit
through the worker pool, and its section's key is read from the config and recorded in the unit."""

import contextlib
import io
import itertools
import json
import re
import subprocess
import sys
import traceback

import pandas as pd
import pytest
from helpers import write_grid_config

from harness.cli.main import main

TOY = '''
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.api import Adapted, Flow, Method, Settings, UnitPlan, option, record_of

# the method a toy unit names (it adapts nothing: the toy flow scores without it)
METHOD = Method("toy-method", ("toy",), Settings, lambda x: Adapted(x.model), "adapts nothing")


@dataclass(kw_only=True)
class ToySettings(Settings):
    """The toy flow's own section."""

    tilt: int = option(0, "the class every test document is given, plus the subsample")


def compute(plan: UnitPlan, keep_adapters: bool = False):
    docs = plan.docs()
    k = len(plan.spec.classes)
    pick = (plan.section("toy").tilt + plan.key.k) % k
    test = docs["test"]
    scored = {
        cond: pd.DataFrame(
            {"row": test["row"], "label": test["label"], "probs": [list(np.eye(k)[pick])] * len(test),
             "correct": test["label"] == pick}
        )
        for cond in plan.grid.conditions
    }
    return record_of(plan, docs, scored, {}, {}, {}, {})


FLOW = Flow(
    name="toy",
    default_method=f"{__file__}:METHOD",
    check=lambda cfg: None,
    check_task=lambda spec: None,
    check_base=lambda base: None,
    compute=compute,
    sections={"toy": (ToySettings, "the toy flow")},
)
'''


FRESH = itertools.count()


def run_flow_file(flow, text: str, tiny_llama, data_dir) -> subprocess.CompletedProcess:
    """`text` written as a flow file and run into <its folder>/out for one unit of ag_news, in this
    process, as `tapt-bench run` runs: its exit status, and what it printed (the one-line error a
    command ends with, or a traceback where one escaped). A process registers a flow under its name
    once, so the file's toy names are made this run's own, as a fresh process would have them."""
    fresh = next(FRESH)
    text = re.sub(r'"(toy(_[a-z]+)?)"', lambda m: f'"{m.group(1)}_{fresh}"', text)
    flow.write_text(text)
    cfg = {"base": str(tiny_llama), "flow": f"{flow}:FLOW", "tasks": ["ag_news"], "m": 4, "n": 6}
    cfg |= {"subsamples": 1, "data_dir": str(data_dir)}
    path = write_grid_config(flow.parent, flow.parent / "out", cfg)
    argv, out, err, code = ["run", "--config", str(path), "--no-summary"], io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 1
            print(exit.code if isinstance(exit.code, str) else "", file=sys.stderr)
        except Exception:  # what a subprocess would print as its traceback
            code = 1
            traceback.print_exc()
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def test_a_flow_from_one_file_with_a_section_of_its_own_runs_a_unit_through_the_pool(
    tmp_path, tiny_llama, data_dir
):
    (tmp_path / "toy_flow.py").write_text(TOY)
    cfg = {
        "base": str(tiny_llama),
        "flow": f"{tmp_path / 'toy_flow.py'}:FLOW",
        "tilt": 2,  # the toy flow's own key, in its own section
        "tasks": ["ag_news"],
        "m": 4,
        "n": 6,
        "subsamples": 2,
        "data_dir": str(data_dir),
    }
    path = write_grid_config(tmp_path, tmp_path / "out", cfg)
    main(["run", "--config", str(path), "--workers", "2", "--no-summary"])
    (tdir,) = (tmp_path / "out").rglob("ag_news")
    for k in (0, 1):
        unit = json.loads((tdir / "units" / f"{k}.json").read_text())
        assert unit["settings"]["tilt"] == 2  # its section recorded with the unit
        probs = pd.read_parquet(tdir / "units" / f"{k}.parquet")
        assert {int(max(range(4), key=p.__getitem__)) for p in probs["probs"]} == {(2 + k) % 4}


def test_a_flow_file_edited_between_two_runs_into_one_out_is_refused_naming_its_code(
    tmp_path, tiny_llama, data_dir
):
    from harness.grid.unit import flow as flows

    flow = tmp_path / "toy_flow.py"
    own = TOY.replace('"toy"', '"toy_edit"')  # a flow name of its own: this process registered "toy"
    flow.write_text(own)
    cfg = {"base": str(tiny_llama), "flow": f"{flow}:FLOW", "tasks": ["ag_news"], "m": 4, "n": 6}
    path = write_grid_config(tmp_path, tmp_path / "out", cfg | {"subsamples": 1, "data_dir": str(data_dir)})
    main(["run", "--config", str(path), "--no-summary"])
    (tdir,) = (tmp_path / "out").rglob("ag_news")
    first = json.loads((tdir / "units" / "0.json").read_text())["settings"]["flow_code"]
    flow.write_text(own.replace("pick = (plan.section", "pick = 1 + (plan.section"))  # the flow edited
    path = write_grid_config(tmp_path, tmp_path / "out", cfg | {"subsamples": 2, "data_dir": str(data_dir)})
    flows.FLOWS.pop("toy_edit")  # as a new process finds it, as a rerun is: this one kept the first file's
    with pytest.raises(SystemExit, match=rf"flow_code: '{first}' -> '[0-9a-f]+'"):
        main(["run", "--config", str(path), "--no-summary"])
    assert not (tdir / "units" / "1.json").exists()


CORRECT, ROW = '"correct": test["label"] == pick', '"row": test["row"]'


@pytest.mark.parametrize(
    "edit, said",
    [
        ((CORRECT, CORRECT), None),  # the flow as written: its units are written
        ((CORRECT, '"correct": np.where(test["label"] == pick, 1.0, np.nan)'), "`correct` holds"),
        ((CORRECT, '"correct": ["yes"] * len(test)'), "`correct` holds 'yes'"),
        ((ROW, '"row": test["row"] + 10**7'), "base's scores hold row 1000"),  # rows not in the pool
        ((ROW, '"row": [test["row"].iloc[0]] * len(test)'), "cover 1 of its 6 test documents in 6 rows"),
    ],
)
def test_what_a_flow_returns_is_checked_before_anything_is_written(
    tmp_path, tiny_llama, data_dir, edit, said
):
    flow = tmp_path / "odd_flow.py"
    done = run_flow_file(flow, TOY.replace('"toy"', '"toy_odd"').replace(*edit), tiny_llama, data_dir)
    units = list((tmp_path / "out").rglob("units/*.json"))
    if said is None:
        assert done.returncode == 0 and len(units) == 1
        return
    assert done.returncode == 1 and said in done.stderr and "nothing of it is written" in done.stderr
    assert not units


@pytest.mark.parametrize(
    "body, said",
    [
        ("return None", "returned NoneType for ag_news subsample 0; its compute must return a UnitRecord"),
        ("raise ValueError('a plug-in bug')", "failed: ValueError: a plug-in bug; fix that file"),
        ("return record_of(plan, docs, {c: scored[c] for c in scored if c != 'test'}, {}, {}, {}, {})",
         "its accuracy of test is None"),
    ],
)  # fmt: skip
def test_a_flows_failure_or_odd_return_is_one_line_naming_its_file(
    tmp_path, tiny_llama, data_dir, body, said
):
    odd = TOY.replace('"toy"', '"toy_bad"')
    odd = odd.replace("    return record_of(plan, docs, scored, {}, {}, {}, {})", f"    {body}")
    done = run_flow_file(tmp_path / "odd_flow.py", odd, tiny_llama, data_dir)
    assert done.returncode == 1 and said in done.stderr and "Traceback" not in done.stderr, done.stderr[-500:]
    assert not list((tmp_path / "out").rglob("units/*.json"))


@pytest.mark.parametrize(
    "change, said",
    [
        (('name="toy"', 'name="classifier"'), "its Flow is named 'classifier', the name of another flow"),
        (
            ("check=lambda cfg: None", "check=lambda cfg: 1 / 0"),
            "failed: ZeroDivisionError: division by zero",
        ),
        (('{"toy": (ToySettings, "the toy flow")}', '{"toy": (dict, "t")}'), "a section is (a Settings"),
        (('{"toy": (ToySettings, "the toy flow")}', '{"toy": ToySettings}'), "a section is (a Settings"),
        (
            ('{"toy": (ToySettings, "the toy flow")}', '{"grid": (ToySettings, "t")}'),
            "a section every config",
        ),
        (("tilt: int = option(", "seed: int = option("), "declares ['seed'], key(s) a config already has"),
        (
            ('sections={"toy": (ToySettings, "the toy flow")},', 'sections={}, reads=("from",),'),
            "its Flow reads ['from'], no shared section; it may read ['form']",
        ),
    ],
)
def test_a_flow_plug_ins_faults_are_one_line_naming_its_file(tmp_path, tiny_llama, data_dir, change, said):
    flow = tmp_path / "faulty_flow.py"
    assert change[0] in TOY
    done = run_flow_file(flow, TOY.replace(*change), tiny_llama, data_dir)
    assert done.returncode == 1 and said in done.stderr and "Traceback" not in done.stderr, done.stderr[-600:]
    assert str(flow) in done.stderr and not (tmp_path / "out").exists()


def test_an_identical_flow_file_read_from_another_folder_resumes_the_same_units(
    tmp_path, tiny_llama, data_dir
):
    from harness.grid.unit import flow as flows

    own = TOY.replace('"toy"', '"toy_moved"')  # a flow name of its own: this process registered "toy"
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "toy_flow.py").write_text(own)
    cfg = {"base": str(tiny_llama), "tasks": ["ag_news"], "m": 4, "n": 6, "data_dir": str(data_dir)}
    first = cfg | {"flow": f"{tmp_path / 'a' / 'toy_flow.py'}:FLOW", "subsamples": 1}
    main(["run", "--config", str(write_grid_config(tmp_path, tmp_path / "out", first)), "--no-summary"])
    moved = cfg | {"flow": f"{tmp_path / 'b' / 'toy_flow.py'}:FLOW", "subsamples": 2}
    flows.FLOWS.pop("toy_moved")  # as a new process finds it, as a rerun is
    # was: refused, "their numbers would be mixed"
    main(["run", "--config", str(write_grid_config(tmp_path, tmp_path / "out", moved)), "--no-summary"])
    (tdir,) = (tmp_path / "out").rglob("ag_news")
    assert len(pd.read_csv(tdir / "accuracies.csv")) == 2  # unit 0 kept, unit 1 added beside it


def test_a_flows_default_method_that_is_no_method_is_blamed_on_its_file(tmp_path, tiny_llama, data_dir):
    flow = tmp_path / "toy_flow.py"
    flow.write_text(TOY.replace('"toy"', '"toy_dm"').replace('f"{__file__}:METHOD"', '"no-such-method"'))
    cfg = {"base": str(tiny_llama), "flow": f"{flow}:FLOW", "tasks": ["ag_news"], "m": 4, "n": 6}
    path = write_grid_config(tmp_path, tmp_path / "out", cfg | {"data_dir": str(data_dir)})
    said = f"key 'flow' 'toy_dm' \\({flow}\\): its default_method 'no-such-method' is not a method"
    with pytest.raises(SystemExit, match=said):  # was blamed on a key 'method' the config lacks
        main(["run", "--config", str(path)])
    assert not (tmp_path / "out").exists()


def test_a_flow_refused_for_its_sections_is_not_kept_to_change_a_later_runs_record(
    tmp_path, tiny_llama, data_dir
):
    from harness.grid.unit.flow import section_readers

    bad = TOY.replace('{"toy": (ToySettings, "the toy flow")}', '{"grid": (ToySettings, "t")}')
    done = run_flow_file(tmp_path / "grid_flow.py", bad, tiny_llama, data_dir)
    assert done.returncode == 1 and "a section every config has" in done.stderr
    assert "grid" not in section_readers()  # else every later run records no grid section
