"""An answer that stands up: a collapse read with the gold labels, no check skipped without a word, an
"inflated" never replaced, a confirmed result only from its plan, and intervals that cover at their rate."""

import json

import numpy as np
import pandas as pd
import pytest

from harness import results
from harness.cli.main import main
from harness.core.plumbing.errors import UserError
from harness.results import collect
from harness.stats.summary import confirmation
from harness.stats.summary.statistics import flip_interval
from harness.stats.summary.summary import summarize

N = 100  # documents a unit: accuracies in steps of 1/100


def unit(tdir, k: int, accs: dict, one: dict | None = None, labels=None, code=None) -> None:
    """A finished unit: per condition a prediction per document; the conditions in `one` give that
    class throughout, the others the gold label; gold labels alternate unless `labels` is given."""
    labels = [d % 2 for d in range(N)] if labels is None else labels
    rows = []
    for cond in accs:
        for doc, gold in enumerate(labels):
            top = (one or {}).get(cond, gold)
            rows.append({"row": doc, "label": gold, "probs": [0.9, 0.1] if top == 0 else [0.1, 0.9]})
            rows[-1] |= {"condition": cond, "correct": top == gold}
    extra = {"majority": 0.5, "num_classes": 2, "majority_all": 0.5}
    results.write_unit(tdir, k, accs | extra, pd.DataFrame(rows), {"code": code} if code else {})


def accs(k: int, bias: float, leak: float = 0.3) -> dict:
    spread = 0.05 if k % 2 else -0.05
    return {"base": 0.5, "extra": 0.5, "test": 0.5 + bias + spread / 5, "leak": 0.5 + leak + spread}


def pooled(root) -> dict:
    (config,) = summarize(collect(root), seed=0, target=0.05)["configs"]
    return config


def test_a_model_right_on_a_test_split_of_one_class_is_not_collapsed(tmp_path):
    """Two of ten units draw a test split of one gold class, and their models answer it right: a model
    that gives one class is collapsed only where the labels are not all that class."""
    tdir = tmp_path / "m8" / f"n{N}" / "toy" / "a"
    for k in range(10):
        if k < 2:
            unit(tdir, k, accs(k, 0.0), {"extra": 1, "test": 1}, labels=[1] * N)
        else:
            unit(tdir, k, accs(k, 0.0))
    results.rebuild(tdir)
    c = pooled(tmp_path)
    assert (c["bias_one_class_extra"], c["bias_one_class_test"], c["bias_one_class"]) == (0, 0, 0)
    assert c["bias_verdict"] == "not inflated beyond" and "bias_uninformative" not in c


def test_extra_and_test_collapsed_to_different_classes_do_not_agree_by_construction(tmp_path):
    tdir = tmp_path / "m8" / f"n{N}" / "toy" / "a"
    for k in range(10):
        unit(tdir, k, accs(k, 0.0), {"extra": 0, "test": 1} if k < 3 else {})
    results.rebuild(tdir)
    c = pooled(tmp_path)
    assert (c["bias_one_class_extra"], c["bias_one_class_test"], c["bias_one_class"]) == (3, 3, 0)


def test_unit_records_without_probabilities_are_an_error_naming_the_file(tmp_path, capsys):
    tdir = tmp_path / "m8" / f"n{N}" / "toy" / "a"
    for k in range(8):
        unit(tdir, k, accs(k, 0.0))
    results.rebuild(tdir)
    (tdir / "probabilities.parquet").unlink()
    with pytest.raises(UserError, match=r"toy/a: 8 finished unit.* and no probabilities\.parquet"):
        collect(tmp_path)
    # accuracies alone (made elsewhere, no unit records): the check is said not to have run
    import shutil

    shutil.rmtree(tdir / "units")
    c = pooled(tmp_path)
    assert c["bias_unchecked"] == 8
    main(["summarize", str(tmp_path)])
    assert "the collapse check did not run on 8 of 8 units" in capsys.readouterr().out


def test_units_copied_in_without_their_tables_are_an_error_not_a_smaller_study(tmp_path):
    """Units carried onto a new machine, a task's tables not rebuilt: reading the tables would pool 4 of
    8 units and call the plan whole. The folder is named, and what rebuilds it."""
    tdir = tmp_path / "m8" / f"n{N}" / "toy" / "a"
    for k in range(4):
        unit(tdir, k, accs(k, 0.0))
    results.rebuild(tdir)
    for k in range(4, 8):
        unit(tdir, k, accs(k, 0.0))
    with pytest.raises(UserError, match=r"toy/a: 8 finished unit\(s\) in units/ and 4 in accuracies"):
        collect(tmp_path)
    (tdir / "accuracies.csv").unlink()
    with pytest.raises(UserError, match=r"and no accuracies\.csv: its tables are stale.*Rerun the grid"):
        collect(tmp_path)
    results.lock_path(tdir.parent, (0, 1)).write_text("{}")  # a run may be writing it: said so
    with pytest.raises(UserError, match=r"tables\); \.lock-shard0of1 is there: if that run still writes"):
        collect(tmp_path)
    results.rebuild(tdir)
    assert len(collect(tmp_path)) == 8


def test_an_inflated_bias_stays_inflated_beside_a_collapse(tmp_path, capsys):
    """Ten units with a bias of 20 points, two of them with extra and test collapsed to one class: the
    word is 'inflated', and the collapse is printed beside it, not in its place."""
    tdir = tmp_path / "m8" / f"n{N}" / "toy" / "a"
    for k in range(10):
        unit(tdir, k, accs(k, 0.2), {"extra": 0, "test": 0} if k < 2 else {})
    results.rebuild(tdir)
    c = pooled(tmp_path)
    assert c["bias_one_class"] == 2 and "bias_uninformative" in c
    assert c["bias_verdict"] == "inflated" and c["bias_p_family"] <= 0.05
    main(["summarize", str(tmp_path)])
    out = capsys.readouterr().out
    assert ": inflated (corrected p <= 0.05); the design is uninformative of an absence: in 2 of 10" in out


def test_the_family_is_corrected_together(tmp_path):
    for model, bias in (("one", 0.2), ("two", 0.0)):
        tdir = tmp_path / "m8" / f"n{N}" / model / "a"
        for k in range(10):
            unit(tdir, k, accs(k, bias))
        results.rebuild(tdir)
    configs = summarize(collect(tmp_path), seed=0, target=0.05)["configs"]
    (low, high), got = sorted(c["bias_p_test"] for c in configs), sorted(c["bias_p_family"] for c in configs)
    assert low < 0.05 < high and got == pytest.approx([min(2 * low, high), high])  # BH of two p-values
    assert all(c["bias_family_size"] == 2 for c in configs)


def planned(root, commits: list[str], dirty=False, subsamples=6) -> object:
    """A confirmatory model folder: its manifest's plan, and a unit per commit given."""
    mdir = root / "m8" / f"n{N}" / "toy"
    config = {"confirmatory": True, "tasks": ["a"], "subsamples": subsamples, "sides": "two"}
    config |= {"alpha": 0.05, "family": "config", "equivalence_bound": 5.0, "seed": 7}
    from harness.core.design.study_plan import config_hash

    hashed = config_hash(config)  # the hash a run records of its config
    results.write_json(results.manifest_path(mdir, (0, 1)), {"config": config, "config_hash": hashed})
    for k, commit in enumerate(commits):
        unit(mdir / "a", k, accs(k, 0.0), code={"commit": commit, "dirty": dirty, "config_hash": hashed})
    results.rebuild(mdir / "a")
    return mdir


def test_units_from_two_commits_are_not_confirmed(tmp_path):
    same = confirmation.confirmation(planned(tmp_path / "same", ["a" * 40] * 6))
    assert same["status"] == "confirmed", same["why"]
    two = confirmation.confirmation(planned(tmp_path / "two", ["a" * 40] * 3 + ["b" * 40] * 3))
    assert two["status"] == "exploratory"
    assert two["why"] == [f"its units ran on 2 commits of the code ({{'{'a' * 10}': 3, '{'b' * 10}': 3}})"]
    short = confirmation.confirmation(planned(tmp_path / "short", ["a" * 40] * 5))
    assert short["why"] == ["5 of its 6 planned units finished (missing: a [5])"]
    dirty = confirmation.confirmation(planned(tmp_path / "dirty", ["a" * 40] * 6, dirty=True))
    assert dirty["why"] == ["6 units ran on code with uncommitted changes"]


def test_the_summary_says_confirmed_or_exploratory_and_why(tmp_path, capsys):
    planned(tmp_path, ["a" * 40] * 6)
    main(["summarize", str(tmp_path)])
    assert (
        "confirmed: every planned unit (6 a task, seed 7) ran on commit aaaaaaaaaa" in capsys.readouterr().out
    )
    main(["summarize", str(tmp_path), "--json"])
    found = json.loads(capsys.readouterr().out)["configs"][0]["confirmation"]
    assert found["status"] == "confirmed"


@pytest.mark.parametrize("units", [8, 20])
def test_the_interval_covers_a_known_effect_at_its_rate(units):
    """400 simulated studies of a known bias: the two-sided 95% interval misses it about 5% of the time,
    about half of them on each side (a one-sided bound, or an interval of the wrong width, fails)."""
    rng = np.random.default_rng(11)
    truth, below, above = 0.03, 0, 0
    for r in range(400):
        low, high = flip_interval(truth + rng.normal(0, 0.075, units), seed=r)
        below, above = below + (high < truth), above + (low > truth)
    assert 0.02 <= (below + above) / 400 <= 0.08, (below, above)
    assert below >= 2 and above >= 2, (below, above)
