"""The pooled verdict reads whether the design could see a bias: no "not inflated" from models that give
every test document one class, nor from a design blind to its planted leak."""

import json

import numpy as np
import pandas as pd
import pytest

from harness import results
from harness.cli.main import main
from harness.results import collect
from harness.stats.summary.summary import summarize

N = 100  # documents a unit: accuracies in steps of 1/100


def unit(tdir, k: int, accs: dict, collapsed: tuple = ()) -> None:
    """One finished unit through the results layout's own writer: its accuracies, and per condition a
    prediction for each of N documents (one class throughout for the `collapsed` conditions)."""
    rows = []
    for cond in accs:
        for doc in range(N):
            top = 0 if cond in collapsed else doc % 2
            probs = [0.9, 0.1] if top == 0 else [0.1, 0.9]
            rows.append({"row": doc, "label": doc % 2, "probs": probs, "condition": cond})
    extra = {"majority": 0.5, "num_classes": 2, "majority_all": 0.5}
    results.write_unit(tdir, k, accs | extra, pd.DataFrame(rows), {})


def grid(root, biases, leak_gain: float, collapsed=(), task="a"):
    """One task's units: extra at 0.50, test at 0.50 + the unit's bias, leak at extra + leak_gain + a
    spread (so its test has a spread to read)."""
    tdir = root / "m8" / f"n{N}" / "toy" / task
    for k, bias in enumerate(biases):
        leak = 0.5 + leak_gain + (0.01 if k % 2 else -0.01)
        accs = {"base": 0.5, "extra": 0.5, "test": 0.5 + bias, "leak": leak}
        unit(tdir, k, accs, collapsed if k < len(biases) else ())
    results.rebuild(tdir)
    return root


# small biases, a small spread: under the plain rule, an MDE under 5 pts and "not inflated"
BIASES = [0.0, 0.01, 0.0, -0.01, 0.0, 0.0, 0.01, -0.01]


def pooled(root) -> dict:
    (config,) = summarize(collect(root), seed=0, target=0.05)["configs"]
    return config


def test_a_design_that_sees_its_leak_and_keeps_its_models_gives_its_verdict(tmp_path):
    c = pooled(grid(tmp_path, BIASES, leak_gain=0.30))
    assert c["bias_verdict"] == "not inflated beyond"
    assert (
        100 * c["bias_high"] < 5
        and c["detectable_bias"] < 0.05
        and c["leak_p_value"] <= 0.05
        and c["bias_one_class"] == 0
    )


def test_collapsed_extra_and_test_models_give_no_verdict_and_no_mde(tmp_path, capsys):
    root = grid(tmp_path, BIASES, leak_gain=0.30, collapsed=("extra", "test"))
    c = pooled(root)
    assert c["bias_verdict"] == "uninformative"
    assert np.isnan(c["detectable_bias"])
    assert (c["bias_one_class_extra"], c["bias_one_class_test"], c["bias_one_class"]) == (8, 8, 8)
    main(["summarize", str(root)])
    out = capsys.readouterr().out
    assert "MDE n/a: uninformative: in 8 of 8 units the extra and test models give every test document" in out
    assert "not inflated" not in out
    assert "  a: uninformative: in 8 of 8 units" in out  # the task's row says it too
    main(["summarize", str(root), "--json"])
    assert json.loads(capsys.readouterr().out)["configs"][0]["bias_verdict"] == "uninformative"


def test_one_collapsed_unit_in_ten_is_tolerated_and_two_are_not(tmp_path):
    biases = BIASES + [0.0, 0.01]
    for collapsed_units, verdict in [(1, "not inflated beyond"), (2, "uninformative")]:
        root = tmp_path / str(collapsed_units)
        tdir = root / "m8" / f"n{N}" / "toy" / "a"
        for k, bias in enumerate(biases):
            leak = 0.8 + (0.01 if k % 2 else -0.01)
            accs = {"base": 0.5, "extra": 0.5, "test": 0.5 + bias, "leak": leak}
            unit(tdir, k, accs, ("extra", "test") if k < collapsed_units else ())
        results.rebuild(tdir)
        assert pooled(root)["bias_verdict"] == verdict, collapsed_units


def test_a_leak_the_design_does_not_see_gives_no_verdict(tmp_path, capsys):
    root = grid(tmp_path, BIASES, leak_gain=0.0)
    c = pooled(root)
    assert c["leak_p_value"] > 0.05 and c["bias_verdict"] == "uninformative"
    main(["summarize", str(root)])
    assert "the planted leak (the positive control) was not seen" in capsys.readouterr().out


def test_each_row_is_labelled_with_its_own_subsample_and_collapse(tmp_path):
    """A task of 11 units: the layout lists units/10.json before units/2.json; each accuracies row keeps its
    own subsample's number and one-class conditions."""
    tdir = tmp_path / "m8" / f"n{N}" / "toy" / "a"
    for k in range(11):
        accs = {"base": 0.5, "extra": 0.5, "test": 0.5 + k / N, "leak": 0.9}
        unit(tdir, k, accs, ("test",) if k == 10 else ())
    results.rebuild(tdir)
    df = collect(tmp_path)
    by_k = df.set_index("subsample")
    assert sorted(df["subsample"]) == list(range(11))
    assert by_k["test"].to_dict() == pytest.approx({k: 0.5 + k / N for k in range(11)})
    assert by_k["one_class"].to_dict() == {k: ("test=0" if k == 10 else "") for k in range(11)}
