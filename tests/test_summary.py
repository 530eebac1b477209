"""tapt-bench summarize: means, permutation tests, BH adjustment, the JSON shape, bad input."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.cli.main import main
from harness.core.plumbing.errors import UserError
from harness.results import collect
from harness.stats.summary.summary import paired_pvalue, summarize


def write(root, task, rows, m=10, n=10, model="toy"):
    d = root / f"m{m}" / f"n{n}" / model / task
    d.mkdir(parents=True)
    pd.DataFrame(rows, columns=["base", "extra", "test", "majority", "num_classes", "majority_all"]).to_csv(
        d / "accuracies.csv", index=False
    )


@pytest.fixture
def fixture_dir(tmp_path):
    write(tmp_path, "a", [[0.5, 0.6, 0.7, 0.3, 2, 0.5], [0.4, 0.6, 0.6, 0.3, 2, 0.5]])
    write(
        tmp_path,
        "b",
        [[0.2, 0.1, 0.0, 0.3, 2, 0.5], [0.3, 0.3, 0.2, 0.3, 2, 0.5], [0.5, 0.5, 0.5, 0.3, 2, 0.5]],
    )
    return tmp_path


def refuse(constant):
    raise ValueError(f"{constant} is not JSON")


def test_hand_computed_means(fixture_dir, capsys):
    main(["summarize", str(fixture_dir), "--json"])
    out = json.loads(capsys.readouterr().out, parse_constant=refuse)  # strict: no NaN, no Infinity
    assert set(out) == {"configs", "tasks"}
    (c,) = out["configs"]
    # boosts: a 0.1, 0.2; b -0.1, 0, 0 -> mean 0.2/5; biases: a 0.1, 0; b -0.1, -0.1, 0 -> mean -0.1/5
    # detectable bias: K=2 and K=3 subsamples; the two-sided sign-flip test's smallest p-value 2^(1-K)
    # is above 0.05, and so it is over the 5 pooled units (2^-4): no MDE, no bounded interval
    # strict JSON: an infinite MDE and an unbounded interval are null
    assert c.pop("detectable_bias_median") is None and c.pop("detectable_bias") is None
    assert (c.pop("bias_low"), c.pop("bias_high")) == (None, None)
    assert c.pop("bias_units") == 5 and c.pop("bias_p_value") > 0.5
    assert c.pop("bias_units_per_task") == [2, 3]  # unbalanced: task b weighs more in the pooled mean
    # no plan declared: two-sided at 0.05, the bound the target, the family this summary (one model)
    assert c.pop("bias_p_test") == c.pop("bias_p_family") and c.pop("bias_family_size") == 1
    assert (c.pop("bias_sides"), c.pop("bias_alpha"), c.pop("bias_family")) == ("two", 0.05, "config")
    assert c.pop("bias_family_of") == "exploratory"  # the folder's exploratory models, corrected together
    assert c.pop("bias_verdict") == "inconclusive" and c.pop("bias_bound_pts") == 5.0
    # no probabilities beside these accuracies: no model is counted as collapsed, and that is said
    assert [c.pop(f"bias_one_class{s}") for s in ("", "_extra", "_test")] == [0, 0, 0]
    assert c.pop("bias_unchecked") == 5
    assert c.pop("confirmation")["status"] == "exploratory"
    # accuracies alone, in the release's format: their majority is the study's (bases 0.5, 0.4, 0.2, 0.3, 0.5)
    assert (c.pop("base_above_majority"), c.pop("majority_units")) == (3, 5)
    assert {k: v for k, v in c.items() if not k.startswith("boost_")} == pytest.approx(
        {
            "m": 10,
            "n": 10,
            "model": "toy",
            "bias_mean": -0.02,
            "tasks": 2,
            "rows": 5,
            "tasks_positive_bias": 1,
            "tasks_negative_bias": 1,
        }
    )
    assert c["boost_mean"] == pytest.approx(0.04)
    assert isinstance(c["m"], int) and isinstance(c["n"], int)
    a, b = out["tasks"]
    assert (a["task"], a["boost_mean"], a["bias_mean"]) == ("a", pytest.approx(0.15), pytest.approx(0.05))
    assert (b["task"], b["boost_mean"], b["bias_mean"]) == (
        "b",
        pytest.approx(-1 / 30),
        pytest.approx(-1 / 15),
    )
    assert set(a) == {
        "m",
        "n",
        "model",
        "task",
        "rows",
        "boost_mean",
        "bias_mean",
        "bias_p_value",
        "bias_p_adjusted",
        "detectable_bias",
        "bias_units",
        "bias_one_class",
        "bias_one_class_extra",
        "bias_one_class_test",
        "bias_unchecked",
        "boost_low",
        "boost_high",
        "bias_low",
        "bias_high",
    }
    assert a["detectable_bias"] is None and b["detectable_bias"] is None and (a["rows"], b["rows"]) == (2, 3)
    main(["summarize", str(fixture_dir)])
    out = capsys.readouterr().out
    assert "with under 6 subsamples per task no permutation p-value can fall below 0.05" in out
    assert (
        "(tasks of 2 to 3 units: the tasks with more weigh more): inconclusive (the interval reaches 5" in out
    )


def test_the_pooled_test_sees_a_bias_no_task_alone_can(tmp_path, capsys):
    """Three tasks of 4 subsamples: no task's sign-flip test can reach 0.05 (2^-4), the 12 units pooled
    can; the pooled MDE is the formula's over all 12 differences, and the summary prints both."""
    from harness.stats.summary.summary import detectable_effect

    gains = [0.10, 0.15, 0.05, 0.10]
    for task in ("a", "b", "c"):
        write(tmp_path, task, [[0.5, 0.5, 0.5 + g, 0.3, 2, 0.5] for g in gains], n=20)
    summary = summarize(collect(tmp_path))
    (c,) = summary["configs"]
    assert all(t["bias_p_value"] >= 1 / 16 for t in summary["tasks"])
    assert c["bias_p_value"] < 0.001 and c["bias_units"] == 12
    assert c["detectable_bias"] == pytest.approx(detectable_effect(np.array(gains * 3)))
    assert 0 < c["detectable_bias"] < 0.05
    main(["summarize", str(tmp_path)])
    out = capsys.readouterr().out
    assert "pooled over the 12 units of every task: bias +10.00 pts [+" in out
    assert (
        f"(95%, two-sided), p two-sided {c['bias_p_value']:.4f}, BH over 1 {c['bias_p_value']:.4f}, MDE"
        in out
    )
    assert 0.05 < c["bias_low"] < 0.1 < c["bias_high"] < 0.15
    assert c["bias_verdict"] == "inflated" and ": inflated (corrected p <= 0.05)" in out


def test_a_method_that_moved_nothing_claims_no_power(tmp_path, capsys):
    """Six subsamples whose test and extra accuracies are equal: a zero spread gives no MDE (inf), not an
    MDE of 0, and the summary says why instead of blaming the subsample count."""
    from harness.stats.summary.summary import detectable_effect

    assert detectable_effect(np.zeros(6)) == float("inf")
    write(tmp_path, "a", [[0.5, 0.4 + i / 20, 0.4 + i / 20, 0.3, 2, 0.5] for i in range(6)], n=20)
    (c,) = summarize(collect(tmp_path))["configs"]
    assert c["detectable_bias"] == c["detectable_bias_median"] == float("inf")
    main(["summarize", str(tmp_path)])
    out = capsys.readouterr().out
    assert "bias is the same in every one" in out and "with under 5 subsamples" not in out
    # every unit's bias is 0: the interval is [0, 0], so "not inflated beyond" holds of these units
    assert c["bias_verdict"] == "not inflated beyond" and "bias_units_needed" not in c
    assert "units of every task: bias +0.00 pts [+0.00, +0.00] (95%, two-sided), p two-sided 1.0000" in out


def test_the_pooled_verdict_reads_the_interval_against_the_bound(tmp_path, capsys):
    """Eight subsamples whose biases cancel (p well above 0.05): with a bound above the interval's upper
    end the bias is 'not inflated beyond' it; with a bound inside it, 'inconclusive', with the units that
    would bring the MDE to the bound: K * (MDE / bound)^2, rounded up."""
    from harness.stats.summary.summary import detectable_effect

    biases = [0.05, -0.05, 0.10, -0.10, 0.05, -0.05, 0.0, 0.0]
    write(tmp_path, "a", [[0.5, 0.5, 0.5 + b, 0.3, 2, 0.5] for b in biases], n=20)
    mde = detectable_effect(np.array(biases))
    loose = summarize(collect(tmp_path), target=0.10)["configs"][0]
    assert loose["bias_p_value"] > 0.3 and 0.05 < loose["bias_high"] < 0.10
    assert loose["bias_verdict"] == "not inflated beyond"
    main(["summarize", str(tmp_path), "--target", "5"])
    out = capsys.readouterr().out
    needed = int(np.ceil(8 * (mde / 0.05) ** 2))
    assert needed > 8
    assert f"MDE {100 * mde:.2f} pts: inconclusive (the interval reaches 5 pts; about {needed} units" in out
    main(["summarize", str(tmp_path), "--json", "--target", "5"])
    (c,) = json.loads(capsys.readouterr().out)["configs"]
    assert c["bias_units_needed"] == needed and c["bias_bound_pts"] == 5.0


def test_detectable_bias_by_hand():
    """(t_0.975,5 + t_0.80,5) * sd / sqrt(6) for six differences (the two-sided test); one subsample
    fewer cannot reject (its smallest two-sided p-value, 2^-4, is above 0.05)."""
    from harness.stats.summary.summary import detectable_effect

    d = np.array([0.1, 0.0, 0.1, 0.0, 0.05, 0.05])
    sd = np.sqrt(np.sum((d - 0.05) ** 2) / 5)
    assert detectable_effect(d) == pytest.approx((2.5706 + 0.9195) * sd / np.sqrt(6), rel=1e-3)
    assert detectable_effect(d[:5]) == float("inf")
    assert paired_pvalue(np.full(5, 0.9), np.full(5, 0.1)) > 0.05  # why: five equal gains give p = 1/16


def test_detectable_bias_matches_a_brute_force_power_simulation():
    """Shift the observed differences (centered) by the MDE, resample them, run the permutation test:
    about 80% of the runs reject at 0.05, within the simulation's Monte Carlo error."""
    from harness.stats.summary.summary import detectable_effect

    rng = np.random.default_rng(0)
    observed = rng.normal(0.004, 0.03, 20)
    mde = detectable_effect(observed)
    assert mde == pytest.approx(0.03 * (1.729 + 0.861) / np.sqrt(20), rel=0.25)
    centered = observed - observed.mean()
    trials = 300
    rejected = [
        paired_pvalue(rng.choice(centered, 20) + mde, np.zeros(20), seed=t) < 0.05 for t in range(trials)
    ]
    power, error = np.mean(rejected), np.sqrt(0.8 * 0.2 / trials)
    assert abs(power - 0.80) < 3 * error, (power, error)


def test_permutation_p_values():
    rng = np.random.default_rng(1)
    extra = rng.uniform(0.5, 0.7, 20)
    assert paired_pvalue(extra + 0.1 + rng.normal(0, 0.01, 20), extra) < 0.001
    null = extra + rng.normal(0, 0.05, 20)
    assert paired_pvalue(null, extra) > 0.05
    assert paired_pvalue(extra - 0.1, extra) < 0.001  # two-sided: a loss is seen too
    assert paired_pvalue(extra - 0.1, extra, alternative="greater") > 0.99  # the study's one-sided test


def test_bh_adjustment_matches_the_formula(tmp_path):
    rng = np.random.default_rng(0)
    for i, shift in enumerate([0.0, 0.02, 0.05, 0.1]):
        extra = rng.integers(40, 60, 12) / 100
        test = np.clip(extra + shift + rng.integers(-3, 4, 12) / 100, 0, 1)
        write(tmp_path, f"t{i}", [[0.5, e, t, 0.3, 2, 0.5] for e, t in zip(extra, test)], n=100)
    tasks = summarize(collect(tmp_path))["tasks"]
    p = np.array([t["bias_p_value"] for t in tasks])
    order = np.argsort(p)
    ranked = p[order] * len(p) / np.arange(1, len(p) + 1)
    expected = np.empty_like(p)
    expected[order] = np.minimum.accumulate(ranked[::-1])[::-1].clip(max=1)
    assert [t["bias_p_adjusted"] for t in tasks] == pytest.approx(expected.tolist())


@pytest.mark.slow  # the study's release is in ../shared, beside the checkout
@pytest.mark.parametrize(
    "family, rows", [("bert_gpt2", 27000), ("zero_shot", 500), ("zero_shot_packing", 500)]
)
def test_reads_the_study_release(reference_dir, family, rows):
    df = collect(reference_dir / "accuracies" / family)
    assert len(df) == rows and df[["base", "extra", "test"]].notna().all().all()
    one_cell = df[
        (df["m"] == df["m"].min()) & (df["n"] == df["n"].max())
    ]  # the whole release: `summarize` CLI
    summary = summarize(one_cell)
    assert sum(c["rows"] for c in summary["configs"]) == len(one_cell) and len(summary["tasks"]) >= 20


def test_bad_input(tmp_path):
    with pytest.raises(UserError, match="no accuracies.csv found"):
        collect(tmp_path)
    d = tmp_path / "m10" / "n10" / "toy" / "a"
    d.mkdir(parents=True)
    (d / "accuracies.csv").write_bytes(b'\x00\xff\xfe garbage "unclosed\n1,2')
    with pytest.raises(UserError, match="a/accuracies.csv: unreadable accuracies.csv"):
        collect(tmp_path)
    (d / "accuracies.csv").write_text("base,extra,test\n0.1,0.2,0.3\n")
    with pytest.raises(UserError, match=r"missing column\(s\) \['majority', 'num_classes', 'majority_all'\]"):
        collect(tmp_path)
    (d / "accuracies.csv").write_text(
        "base,extra,test,majority,num_classes,majority_all\n0.1,0.2,0.3,0,2,0.5\n0.25,0.2,0.3,0,2,0.5\n"
    )
    with pytest.raises(UserError, match="row 1 is not a multiple of 1/10 .* rows of another n are mixed"):
        collect(tmp_path)
    (d / "accuracies.csv").write_text(
        "base,extra,test,majority,num_classes,majority_all\n0.1,0.2,0.3,0,2,0.5\n0.1,abc,0.3,0,2,0.5\n"
    )
    with pytest.raises(UserError, match="row 1 \\(line 3\\), column 'extra': 'abc' is not a number"):
        collect(tmp_path)
    (d / "accuracies.csv").write_text(  # a multiple of 1/10 that no accuracy can be
        "base,extra,test,majority,num_classes,majority_all\n0.1,0.2,0.3,0,2,0.5\n0.1,0.2,1.5,0,2,0.5\n"
    )
    with pytest.raises(
        UserError, match="row 1 \\(line 3\\), column 'test': accuracy 1.5 is outside \\[0, 1\\]"
    ):
        collect(tmp_path)


def write_predictions(folder, predicted: dict[str, list[int]], docs: int) -> list[dict]:
    """A task folder's probabilities.parquet whose predicted classes are `predicted` (per condition, the
    subsamples' documents in turn, `docs` a subsample); its rows."""
    folder.mkdir(parents=True)
    rows = [
        {
            "subsample": i // docs,
            "row": i % docs,
            "condition": c,
            "probs": [0.9, 0.1] if p == 0 else [0.2, 0.8],
        }
        for c, preds in predicted.items()
        for i, p in enumerate(preds)
    ]
    pd.DataFrame(rows).to_parquet(folder / "probabilities.parquet")
    return rows


def test_prediction_changes_count_documents_whose_class_moved(tmp_path):
    from harness.stats.summary.summary import prediction_changes

    predicted = {"base": [0, 1, 1, 0], "extra": [0, 1, 0, 0], "test": [1, 1, 0, 1]}  # 2 subsamples x 2 docs
    rows = write_predictions(tmp_path / "m10" / "n10" / "toy" / "a", predicted, docs=2)
    (got,) = prediction_changes(tmp_path / "m10" / "n10" / "toy").to_dict("records")
    assert got == {"task": "a", "docs": 4, "extra/base": 0.25, "test/base": 0.75, "test/extra": 0.5}
    # a second method's folder beside it: from the folder above both, each task is named by its path
    other = tmp_path / "m10" / "n10" / "toy+other" / "a"
    other.mkdir(parents=True)
    pd.DataFrame([{**r, "probs": [0.5, 0.5]} for r in rows]).to_parquet(other / "probabilities.parquet")
    both = prediction_changes(tmp_path).set_index("task")
    assert (
        both.loc["m10/n10/toy/a", "test/base"] == 0.75 and both.loc["m10/n10/toy+other/a", "test/base"] == 0
    )


def test_a_model_that_gives_every_document_one_class_is_named_collapsed(tmp_path):
    from harness.stats.presentation.summary_text import format_one_class
    from harness.stats.summary.summary import one_class

    d = tmp_path / "m10" / "n10" / "toy" / "a"
    # 2 subsamples x 3 docs: extra answers class 1 throughout in subsample 0 only, test in both
    predicted = {"base": [0, 1, 0, 1, 0, 0], "extra": [1, 1, 1, 0, 1, 1], "test": [1, 1, 1, 0, 0, 0]}
    rows = write_predictions(d, predicted, docs=3)
    (got,) = one_class(tmp_path / "m10" / "n10" / "toy").to_dict("records")
    assert got == {"task": "a", "units": 2, "base": 0.0, "extra": 0.5, "test": 1.0}
    shown = format_one_class(one_class(tmp_path / "m10" / "n10" / "toy"))
    assert "a bias between two such models does not measure the method's" in shown
    assert shown.splitlines()[-1].split() == ["a", "2", "0%", "50%", "100%"]
    rows = [{**r, "probs": [0.9, 0.1] if r["row"] == 0 else [0.2, 0.8]} for r in rows]
    pd.DataFrame(rows).to_parquet(d / "probabilities.parquet")
    assert format_one_class(one_class(tmp_path / "m10" / "n10" / "toy")) == ""  # nothing collapsed: silent


def test_a_new_effect_is_one_entry_of_conditions_and_the_tables_follow(monkeypatch):
    """The summary, its text and the report read conditions.EFFECTS: an effect added there (here the
    leak against base, tested) gets its mean, p-values and columns with no other change."""
    from harness.core.design import conditions
    from harness.stats.presentation import report
    from harness.stats.presentation.summary_text import format_tables

    monkeypatch.setattr(conditions, "EFFECTS", {**conditions.EFFECTS, "total": ("base", "leak")})
    monkeypatch.setattr(conditions, "TESTED", (*conditions.TESTED, "total"))
    rng = np.random.default_rng(0)
    base = rng.integers(30, 50, 6) / 100
    df = pd.DataFrame(
        {
            "m": 10,
            "n": 100,
            "model": "toy",
            "task": "a",
            "base": base,
            "extra": base,
            "test": base,
            "leak": base + 0.2,
        }
    )
    s = summarize(df)
    (t,) = s["tasks"]
    assert t["total_mean"] == pytest.approx(0.2) and t["total_p_value"] == pytest.approx(2 / 64, abs=0.01)
    assert s["configs"][0]["total_mean"] == pytest.approx(0.2) and "total_p_adjusted" in t
    text = format_tables(s)
    assert "total (leak-base) +20.00 pts" in text
    assert text.splitlines()[3].split()[-5:] == ["total", "low", "high", "p", "p_BH"]
    page = report.summary_section(s["configs"][0], s["tasks"])
    assert "p (total)" in page and "total (leak - base) <b>+20.00</b>" in page


def test_the_exposure_table_of_methods_side_by_side_names_each_model():
    """`summarize` over a methods run: each model's rows under its name, the same task under both."""
    from harness.stats.summary.exposure_summary import format_exposure

    shares, tasks = [], []
    for model, seen in (("lm", 1.0), ("lm+tlm", 0.4)):
        test, extra = {"text": seen, "label": 0.0}, {"text": 0.0, "label": 0.0, "extra_text": 1.0}
        cell = {"m": 8, "n": 8, "model": model, "task": "trec"}
        shares.append({**cell, "units": 5, "test": test, "extra": extra})
        tasks.append({**cell, "bias_mean": 0.1 * seen})
    lines = format_exposure(shares, {"tasks": tasks}).splitlines()
    assert lines[2:4] == ["  lm:", lines[3]] and lines[4] == "  lm+tlm:"
    assert "+10.00" in lines[3] and "100%" in lines[3] and "+4.00" in lines[5] and "40%" in lines[5]
    assert "flagged for extra's text in every task" in lines[-1]
    one = format_exposure(shares[:1], {"tasks": tasks[:1]}).splitlines()
    assert one[2].lstrip().startswith("trec")  # one model: no heading


def test_what_each_method_did_lines_up_under_its_headers():
    """A method's folder name longer than the column and a diagnostic one method lacks ('-'): every
    line of the table is as wide as its header, so each number stands under its column."""
    from harness.stats.summary.diagnostics import format_records

    df = pd.DataFrame(
        [
            {"model": "m", "task": "a", "condition": "test", "learned from": 8.0, "kept": np.nan},
            {
                "model": "m+test-time-learning-long-name",
                "task": "a",
                "condition": "test",
                "learned from": 8.0,
                "kept": 6.0,
            },
        ]
    )
    header, *rows = format_records(df).splitlines()[1:]
    assert {len(r) for r in rows} == {len(header)}
    assert rows[0].endswith(f"{'-':>14}") and rows[1].endswith(f"{6.0:14.3g}")


def test_sibling_runs_of_the_same_units_are_never_pooled(tmp_path, tiny_grid):
    """A pilot's leak-1/ and leak-4/ (or a run copied twice) hold the same subsamples: read together they
    would count each unit twice as if independent. The parent is refused, naming both; each reads alone."""
    import shutil

    for name in ("leak-1", "leak-4"):
        shutil.copytree(tiny_grid, tmp_path / "pilot" / name)
    with pytest.raises(UserError, match=r"holds two runs of the same unit .*pilot/leak-1 and .*pilot/leak-4"):
        collect(tmp_path / "pilot")
    assert len(collect(tmp_path / "pilot" / "leak-1")) == len(collect(tiny_grid))


def test_a_voting_method_whose_units_recorded_no_premise_is_said_not_checked(capsys):
    """Test-time RL's shipped units voted on their own labels before the premise was recorded: the summary
    says the premise was not checked, with how many units, rather than nothing."""
    from harness.cli.main import main

    main(["summarize", str(Path(__file__).parents[1] / "studies" / "ttrl_free")])
    out = capsys.readouterr().out
    assert "premise: not checked: 30 unit(s) of this method voted on their own labels" in out


@pytest.mark.parametrize(
    "damage, said",
    [
        ("settings", "its settings were edited after it ran"),
        ("accuracy", "are in no row of"),
        ("table", "not a whole table"),
        ("draw", "its draw says train 'stratified', its settings 'proportional'"),
    ],
)
def test_a_damaged_unit_file_makes_a_confirmed_study_exploratory(tmp_path, damage, said):
    """A shipped confirmed run, one of its unit files damaged after the run: its settings edited with the
    hash kept, its test accuracy changed in the record but not the table, its per-document table cut.
    It is no longer confirmed, and the reason names the file."""
    import shutil

    from harness.stats.summary.confirmation import confirmation

    shipped = Path(__file__).parents[1] / "studies" / "methods_confirm" / "m8" / "n32"
    mdir = tmp_path / "SmolLM2-135M-Instruct+self-training"
    shutil.copytree(shipped / mdir.name, mdir)
    assert confirmation(mdir)["status"] == "confirmed"
    unit = mdir / "ag_news" / "units" / "0.json"
    record = json.loads(unit.read_text())
    if damage == "settings":
        record["settings"]["lr"] = 1.0
    if damage == "accuracy":
        record["test"] = record["test"] + 1 / 32
    if damage == "table":
        unit.with_suffix(".parquet").write_bytes(unit.with_suffix(".parquet").read_bytes()[:500])
    if damage == "draw":  # a record from before draws were recorded: its settings say the first draw
        record["draw"] = {"train": "stratified"}
    unit.write_text(json.dumps(record))
    found = confirmation(mdir)
    assert found["status"] == "exploratory" and any(said in why and "0." in why for why in found["why"])
    for path in mdir.glob("manifest-*.json"):  # with no plan on record, the damage is said all the same
        path.unlink()
    assert any(said in why for why in confirmation(mdir)["why"])
