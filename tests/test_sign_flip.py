"""The sign-flip test and its interval as a reviewer reads them: exact p-values that no seed moves,
an interval that inverts the same test, its coverage on the shapes the grid's units take, the flips
described and never tested over documents, the study's one-sided test on a folder without a plan,
and simultaneous intervals for a sentence about several models at once."""

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.cli.main import main
from harness.results import collect
from harness.stats.presentation.summary_text import format_tables
from harness.stats.summary.sign_flip import SignFlip
from harness.stats.summary.statistics import flip_interval, paired_pvalue
from harness.stats.summary.summary import summarize

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import interval_coverage


def brute_force(d: np.ndarray, shift: float = 0.0) -> float:
    """The two-sided p-value over every one of the 2^K sign vectors, by hand."""
    k = len(d)
    signs = (1 - 2 * ((np.arange(2**k)[:, None] >> np.arange(k)) & 1)).astype(np.int8)
    x = d - shift
    return float(np.mean(np.abs(signs @ x) >= abs(x.sum()) - 1e-12))


def test_a_p_value_of_21_units_is_every_sign_vector_and_does_not_move_with_the_seed():
    """The methods study's 21 units: 2^21 sign vectors, counted exactly (meet in the middle), so every
    seed gives the same p-value, the one a count of all 2,097,152 vectors gives."""
    rng = np.random.default_rng(3)
    extra = rng.integers(10, 22, 21) / 32
    test = extra + rng.choice([-2, -1, 0, 0, 1], 21) / 32
    exact = brute_force(test - extra)
    got = [paired_pvalue(test, extra, seed=s) for s in range(5)]
    assert got == [pytest.approx(exact, abs=1e-12)] * 5, (got, exact)
    assert 0.01 < exact < 0.99  # a p-value a seed could move, were the signs drawn


def test_exact_p_values_match_a_count_of_every_vector_at_any_shift_and_side():
    rng = np.random.default_rng(0)
    for k in (2, 5, 9, 14):
        d = rng.choice(np.arange(-3, 4), k) / 32
        test = SignFlip(d)
        assert test.exact
        for shift in (0.0, 0.01, -1 / 32):
            assert test.pvalue(shift) == pytest.approx(brute_force(d, shift), abs=1e-12)
        signs = 1 - 2 * ((np.arange(2**k)[:, None] >> np.arange(k)) & 1)
        assert test.pvalue(0.0, "greater") == pytest.approx(np.mean(signs @ d >= d.sum() - 1e-12))


def test_the_interval_inverts_the_same_test_at_its_edges():
    """Just inside each edge the test does not reject at 0.05; just outside it does: the interval and
    the p-value are one test (exact at 21 units, drawn at 120)."""
    rng = np.random.default_rng(1)
    for k in (21, 120):
        d = rng.choice(np.arange(-4, 5), k) / 50 + 0.01
        test = SignFlip(d)
        low, high = test.interval()
        assert low < d.mean() < high
        for edge, outward in ((low, -1), (high, 1)):
            assert test.pvalue(edge - outward * 1e-7) > 0.05
            assert test.pvalue(edge + outward * 1e-6) <= 0.05


def test_units_tied_at_one_value_give_a_closed_interval_at_that_value():
    """Every unit's bias the same: no shift but that value is accepted, and the edges hold it (the
    convention: a tie with the observed statistic counts as extreme, so the interval is closed)."""
    low, high = flip_interval(np.full(7, 1 / 32))
    assert low == pytest.approx(1 / 32, abs=1e-9) and high == pytest.approx(1 / 32, abs=1e-9)
    assert low <= 1 / 32 + 1e-9 and high >= 1 / 32 - 1e-9


@pytest.mark.parametrize("k", [7, 21])
def test_the_interval_covers_the_truth_on_units_tied_at_0_in_steps_of_1_32(k):
    """The shipped shape, a third of units exactly 0 and the rest in steps of 1/32: 300 simulated
    studies, the truth held at about the 95% rate, and missed on both sides."""
    held, below, above = interval_coverage.coverage(interval_coverage.tied_at_zero, k, 300, seed=5)
    assert 0.90 <= held <= 0.99, (held, below, above)
    assert below + above >= 3


def write_units(root: Path, model: str, biases: list[float]):
    """One task's units at n 50: extra 0.5, test 0.5 + bias, leak well above."""
    d = root / "m50" / "n50" / model / "a"
    d.mkdir(parents=True)
    rows = []
    for b in biases:
        row = {"base": 0.5, "extra": 0.5, "test": 0.5 + b, "majority": 0.3, "num_classes": 2}
        rows.append(row | {"majority_all": 0.5, "leak": 0.9})
    pd.DataFrame(rows).to_csv(d / "accuracies.csv", index=False)


def test_the_flips_are_described_and_never_tested_over_documents(tmp_path):
    """One unit of 7 holds every flip (20 documents right only under test): a sign test over documents
    calls that p 2e-6; the units, which are what was sampled, do not: with one unit of 7 not 0, every sign
    vector gives the same |sum| (the bias's own test, p 1)."""
    write_units(tmp_path, "toy", [0.4, 0, 0, 0, 0, 0, 0])
    flips = {"flips_test_only": [20, 0, 0, 0, 0, 0, 0], "flips_extra_only": [0] * 7}  # from probabilities
    summary = summarize(collect(tmp_path).assign(**flips))
    (config,) = summary["configs"]
    assert not [k for k in config if "flips" in k and k.endswith("_p")]
    assert config["bias_p_test"] == pytest.approx(1.0)
    text = format_tables(summary)
    flips = next(line for line in text.splitlines() if "flips over those units" in line)
    assert "20 test documents right under test" in flips and "not a test" in flips
    assert " p 0.0" not in flips and "sign test" not in flips


def test_a_folder_without_a_plan_is_read_with_the_sides_a_user_names(tmp_path, capsys):
    """--sides one: the bias's p-values per task and pooled are the study's one-sided ones (H1: above 0);
    a negative bias is then nowhere near significant, where two-sided it is."""
    write_units(tmp_path, "toy", [-0.1] * 8)
    main(["summarize", str(tmp_path), "--json"])
    two = json.loads(capsys.readouterr().out)
    main(["summarize", str(tmp_path), "--json", "--sides", "one", "--family", "model"])
    one = json.loads(capsys.readouterr().out)
    assert two["tasks"][0]["bias_p_value"] == pytest.approx(2 / 256)
    assert one["tasks"][0]["bias_p_value"] == pytest.approx(1.0)
    assert (one["configs"][0]["bias_sides"], one["configs"][0]["bias_family"]) == ("one", "model")
    main(["summarize", str(tmp_path), "--sides", "one"])
    assert "bias p and p_BH: one-sided" in capsys.readouterr().out


def plan_manifest(root: Path, model: str, **plan) -> None:
    config = {"confirmatory": True, "sides": "two", "alpha": 0.05, "family": "config"}
    config |= {"equivalence_bound": 5.0, "seed": 1, "subsamples": 8, "tasks": ["a"]} | plan
    from harness.core.design.study_plan import config_hash

    manifest = {"config": config, "config_hash": config_hash(config)}
    (root / "m50" / "n50" / model / "manifest-shard0of1.json").write_text(json.dumps(manifest))


def test_a_confirmatory_folder_refuses_another_test(tmp_path):
    write_units(tmp_path, "toy", [0.02] * 8)
    plan_manifest(tmp_path, "toy")
    for flags, named in (
        (["--sides", "one"], "--sides one (the plan's: two)"),
        (["--target", "2"], "--target 2.0 (the plan's: 5.0)"),
        (["--family", "model"], "--family model"),
    ):
        with pytest.raises(SystemExit, match="is a confirmatory study") as err:
            main(["summarize", str(tmp_path), *flags])
        assert named in str(err.value)
    main(["summarize", str(tmp_path), "--sides", "two"])  # the plan's own value is no clash


def test_several_models_of_one_family_get_simultaneous_intervals(tmp_path, capsys):
    """Three doses of one plan: each one's interval at 1 - 0.05/3, wider than its own 95% one, and the
    sentence about all three reads them."""
    rng = np.random.default_rng(2)
    for dose in ("d1", "d2", "d3"):
        write_units(tmp_path, dose, list(rng.choice([-2, -1, 0, 1, 2], 8) / 50))
        plan_manifest(tmp_path, dose, method_settings={"x": {"lr": dose}})
    main(["summarize", str(tmp_path), "--json"])
    configs = json.loads(capsys.readouterr().out)["configs"]
    for c in configs:
        assert c["bias_family_size"] == 3 and c["bias_joint_confidence"] == pytest.approx(1 - 0.05 / 3)
        assert c["bias_joint_low"] <= c["bias_low"] and c["bias_joint_high"] >= c["bias_high"]
    main(["summarize", str(tmp_path)])
    assert "simultaneous 95% intervals of the bias over the 3 models of one family" in capsys.readouterr().out


def test_a_model_outside_the_plan_joins_neither_its_family_nor_its_correction(tmp_path, capsys):
    """An exploratory model beside two doses of a plan: the plan's family stays 2."""
    for dose in ("d1", "d2"):
        write_units(tmp_path, dose, [0.02, -0.02, 0, 0.04, 0, 0, 0.02, 0])
        plan_manifest(tmp_path, dose, method_settings={"x": {"lr": dose}})
    write_units(tmp_path, "other", [0.1] * 8)
    main(["summarize", str(tmp_path), "--json"])
    sizes = {c["model"]: c["bias_family_size"] for c in json.loads(capsys.readouterr().out)["configs"]}
    assert sizes == {"d1": 2, "d2": 2, "other": 1}


def test_reading_a_subset_of_tasks_is_post_hoc(tmp_path, capsys):
    write_units(tmp_path, "toy", [0.02] * 8)
    plan_manifest(tmp_path, "toy", tasks=["a", "b"])
    main(["summarize", str(tmp_path), "--tasks", "a"])
    assert "exploratory: post hoc: read on 1 tasks (a), chosen after the data (left out: b)" in (
        capsys.readouterr().out
    )
    with pytest.raises(SystemExit, match="--tasks zz: no such task"):
        main(["summarize", str(tmp_path), "--tasks", "zz"])


@pytest.mark.slow  # the study's release is in ../shared, beside the checkout
def test_the_studys_zero_shot_release_read_one_sided_gives_every_bh_p_above_one_half(reference_dir, capsys):
    """The paper: per task, the one-sided test (H1: test above extra), BH over the 25 tasks: every
    adjusted p above 0.5. Two-sided, the smallest is below 0.5."""
    folder = reference_dir / "accuracies" / "zero_shot"
    main(["summarize", str(folder), "--json", "--sides", "one"])
    one = [t["bias_p_adjusted"] for t in json.loads(capsys.readouterr().out)["tasks"]]
    main(["summarize", str(folder), "--json"])
    two = [t["bias_p_adjusted"] for t in json.loads(capsys.readouterr().out)["tasks"]]
    assert len(one) == 25 and min(one) > 0.5, sorted(one)[:3]
    assert min(two) < 0.5


def test_a_confirmatory_zero_shot_plan_reads_only_the_tasks_its_base_beats_chance_on(
    tmp_path, tiny_llama, data_dir, monkeypatch, capsys
):
    """The screen, before any unit: the base scored on train and extra (never test); here it is made
    to answer every rotten_tomatoes document wrong, so rotten_tomatoes is left out, none of its units
    runs, the screen is written beside the model folder, and the summary names it. A resumed run reads
    the same screen."""
    from helpers import tiny_grid_config

    from harness.study import screen

    real = screen.answers

    def rigged(model, tokenizer, spec, docs, rule, batch_size):
        assert not set(docs["row"]) & set(test_rows[spec.slug]), "the screen read a test document"
        got = real(model, tokenizer, spec, docs, rule, batch_size)
        return np.ones_like(got) if spec.slug == "ag_news" else np.zeros_like(got)

    from harness.grid.configuration.config import load_config
    from harness.tasks.protocol import find_spec, subsample_docs

    path = tiny_grid_config(
        tmp_path,
        tiny_llama,
        data_dir,
        tmp_path / "out",
        tasks=["ag_news", "rotten_tomatoes"],
        subsamples=1,
        conditions=["base", "extra", "test"],
        exposure=False,
        confirmatory=True,
        epochs=1,
    )
    cfg = load_config(path)
    test_rows = {
        slug: list(subsample_docs(find_spec(slug), cfg.sample, 0)["test"]["row"])
        for slug in ("ag_news", "rotten_tomatoes")
    }
    monkeypatch.setattr(screen, "answers", rigged)
    main(["run", "--config", str(path)])
    out = capsys.readouterr().out
    assert "screen (m 4, n 6): rotten_tomatoes: left out: the base answers 0.0% of" in out
    assert "screen (m 4, n 6): ag_news: enters" in out
    written = json.loads((tmp_path / "out" / "m4" / "n6" / f"screen-{tiny_llama.name}.json").read_text())
    assert [s["entered"] for s in written["tasks"]] == [True, False]
    assert (tmp_path / "out" / "m4" / "n6" / "tiny" / "ag_news" / "units" / "0.json").is_file()
    assert not (tmp_path / "out" / "m4" / "n6" / "tiny" / "rotten_tomatoes").exists()
    left = "left out before any unit, the base not above chance on their train and extra documents"
    assert f"{left}: rotten_tomatoes" in out
    monkeypatch.setattr(screen, "answers", lambda *a: pytest.fail("a resumed run screened again"))
    main(["run", "--config", str(path)])
