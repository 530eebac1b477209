"""`tapt-bench pilot`: a pilot on a seed the plan never uses sizes a confirmatory plan from its own spread,
screens the tasks on train and extra, finds the leak strength the plan sees, and writes the plan."""

import json

import numpy as np
import pytest
import yaml

from harness.core.design.power import mde_at, power_at, units_for_bound
from harness.study.pilot import MARK
from harness.study.sizing import per_task_floor

CONFIG = {
    "model_tag": "tiny",
    "flow": "classifier",
    "tasks": ["trec", "ag_news"],
    "m": 24,
    "n": 12,
    "subsamples": 2,
    "conditions": ["base", "extra", "test", "leak"],
    "method_settings": {"raw-text": {"pretrain_epochs": 1, "pretrain_batch_size": 4}},
    "clf_epochs": 16,
    "clf_batch_size": 4,
    "clf_lr": 0.003,
    "eval_batch_size": 12,
    "seed": 5,
    "equivalence_bound": 3.0,
}


def test_the_plans_units_are_the_fewest_that_see_the_bound_and_a_tasks_own_test_can_reject():
    # the first replication's plan, from the study's spread: 121 units for 3 points at sd 11.67
    assert units_for_bound(11.67, 3.0) == 121 and round(mde_at(11.67, 120), 2) == 3.01
    assert units_for_bound(9.57, 3.0) == 82
    assert mde_at(2.4, units_for_bound(2.4, 3.0)) <= 3.0 < mde_at(2.4, units_for_bound(2.4, 3.0) - 1)
    # a task's two-sided sign-flip test reaches 0.05 from 6 units (2 * 2^-5), one-sided from 5
    assert per_task_floor(0.05, "two") == 6 and per_task_floor(0.05, "one") == 5
    # power: 80% at the MDE, more above it, about alpha / 2 a side at 0
    assert power_at(mde_at(5.0, 40), 5.0, 40) == pytest.approx(0.80, abs=0.01)
    assert power_at(2 * mde_at(5.0, 40), 5.0, 40) > 0.99 and power_at(0.0, 5.0, 40) == pytest.approx(0.05)


def pilot(tmp_path, base, data_dir, *flags, **keys):
    from harness.cli.main import main

    config = tmp_path / "study.yaml"
    config.write_text(yaml.safe_dump({"base": str(base), **CONFIG, **keys}))
    plan = tmp_path / "plan.yaml"
    argv = ["pilot", "--config", str(config), "--plan", str(plan), "--plan-seed", "2005"]
    main([*argv, "--out", str(tmp_path / "pilot"), "--data-dir", str(data_dir), *flags])
    return plan


@pytest.mark.slow
def test_the_pilot_writes_a_plan_sized_by_its_own_spread_with_the_leak_it_sees(
    tmp_path, tiny_bert, data_dir, capsys
):
    from harness import results
    from harness.grid.configuration.config import load_config

    plan = pilot(tmp_path, tiny_bert, data_dir, "--strengths", "1", "2")
    said = capsys.readouterr().out
    found = json.loads((tmp_path / "pilot" / "pilot.json").read_text())
    assert found["entered"] == ["trec", "ag_news"] and "screen: trec: enters" in said
    folder = tmp_path / "pilot" / "leak-1" / "m24" / "n12" / "tiny"
    bias = [
        100 * (u["test"] - u["extra"])
        for t in ("trec", "ag_news")
        for u in results.finished(folder / t).values()
    ]
    assert len(bias) == 4 and found["sd"] == pytest.approx(np.std(bias, ddof=1))
    assert (
        found["subsamples"] == max(6, -(-found["units_for_bound"] // 2))
        and found["units"] == 2 * found["subsamples"]
    )
    cfg = load_config(plan, {"data_dir": str(data_dir)})
    assert cfg.slugs == found["entered"] and cfg.grid.subsamples == found["subsamples"]
    assert (cfg.sample.seed, cfg.plan.confirmatory, cfg.grid.leak_strength) == (2005, True, found["strength"])
    text = plan.read_text()
    assert f"sd of test - extra over their pilot units is {found['sd']:.2f} points" in text
    # the leak: each strength tried in turn until one is seen, the entered tasks alone after the first
    assert [lk["strength"] for lk in found["leaks"]][0] == 1
    assert found["leak_seen_with_power"] == any(lk["power"] >= 0.8 for lk in found["leaks"])
    # its power is read at the lower bound of its mean, never above the mean's
    for lk in found["leaks"]:  # (no spread: no bound, no power)
        assert lk["power"] <= lk["power_at_mean"] and (lk["low"] < lk["mean"] or not np.isfinite(lk["low"]))


def test_the_pilot_refuses_its_own_seed_as_the_plans_and_an_existing_plan_before_any_unit(
    tmp_path, tiny_bert, data_dir
):
    with pytest.raises(SystemExit, match="--plan-seed 2005 is the pilot's own seed"):
        pilot(tmp_path, tiny_bert, data_dir, seed=2005)
    # a unit's training seed is the run's seed plus its subsample: a plan seed close by shares them
    with pytest.raises(SystemExit, match="--plan-seed 2005 is within 1000 of the pilot's seed 2001"):
        pilot(tmp_path, tiny_bert, data_dir, seed=2001)
    plan = tmp_path / "plan.yaml"
    plan.write_text("# mine\n")
    for extra in ([], ["--overwrite"]):  # a file the pilot did not write: never replaced
        with pytest.raises(SystemExit, match="plan.yaml exists and is not a plan `tapt-bench pilot` wrote"):
            pilot(tmp_path, tiny_bert, data_dir, *extra)
    assert not (tmp_path / "pilot").exists() and plan.read_text() == "# mine\n"
    plan.write_text(f"# {MARK} --config x` from its pilot\n")
    with pytest.raises(SystemExit, match="plan.yaml exists: name another --plan, or pass --overwrite"):
        pilot(tmp_path, tiny_bert, data_dir)
    plan.unlink()
    plan.mkdir()
    with pytest.raises(SystemExit, match="--plan .*plan.yaml is a folder: name the plan's file"):
        pilot(tmp_path, tiny_bert, data_dir)
    assert not (tmp_path / "pilot").exists()


@pytest.mark.slow
def test_the_pilot_climbs_the_head_recipes_until_the_heads_learn_and_the_plan_names_the_rung(
    tmp_path, tiny_bert, data_dir, capsys, monkeypatch
):
    """One epoch at a low lr leaves the tiny heads near ln K: the screen leaves the tasks out, the pilot
    climbs to `long` (every task's override too), and the plan carries its values and says so. (`long`
    made long enough for a random 2-layer BERT.)"""
    from harness.grid.configuration.config import load_config
    from harness.study import pilot as pilot_module

    monkeypatch.setitem(pilot_module.HEAD_RECIPES, "long", {"clf_epochs": 16.0, "clf_lr": 0.003})

    plan = pilot(
        tmp_path,
        tiny_bert,
        data_dir,
        "--strengths",
        "1",
        "--head-recipes",
        "study",
        "long",
        clf_epochs=1,
        clf_lr=1e-5,
        task_overrides={"trec": {"clf_epochs": 1}},
    )
    said = capsys.readouterr().out
    found = json.loads((tmp_path / "pilot" / "pilot.json").read_text())
    assert "head recipe study (the config's own):" in said and "screen: trec: left out" in said
    assert found["head_recipes_tried"]["study"] == 0 and list(found["head_recipes_tried"]) == [
        "study",
        "long",
    ]
    assert (tmp_path / "pilot" / "head-long" / "leak-1").is_dir()
    cfg = load_config(plan, {"data_dir": str(data_dir)})
    assert found["head_recipe"] == "long" and found["entered"] == ["trec", "ag_news"]
    assert cfg.head.clf_epochs == 16.0 and cfg.head.clf_lr == 0.003
    assert cfg.grid.task_overrides["trec"]["clf_epochs"] == 16.0
    assert "Head recipe: long (clf_epochs 16, clf_lr 0.003)" in plan.read_text()


def test_the_pilot_refuses_to_size_a_plan_from_no_spread():
    from harness.core.plumbing.errors import UserError
    from harness.study.sizing import sized

    class Plan:
        equivalence_bound, alpha, sides = 3.0, 0.05, "two"

    class Config:
        plan = Plan()

    with pytest.raises(
        UserError, match="all have the same bias .* a spread of 0 sizes no plan.*--subsamples"
    ):
        sized(Config(), np.array([2.0, 2.0]), 2)


def test_the_pilot_refuses_a_leak_strength_of_its_own_naming_strengths(tmp_path, capsys):
    """`pilot --leak-strength 4` was offered and ignored: the pilot sets the strength itself."""
    from harness.cli.main import main

    with pytest.raises(
        SystemExit, match=r"--leak-strength 4: the pilot tries each of --strengths.*--strengths 4"
    ):
        main(
            [
                "pilot",
                "--config",
                "demo",
                "--plan",
                str(tmp_path / "p.yaml"),
                "--plan-seed",
                "9",
                "--leak-strength",
                "4",
            ]
        )
    assert not (tmp_path / "p.yaml").exists()


def test_a_negative_strength_among_several_is_named_not_an_unrecognized_argument(data_dir):
    """`pilot --strengths -4 1` said "unrecognized arguments: 1" (the minus value was joined to its flag,
    as a single value's is); the strengths' own check now names both."""
    from harness.cli.main import main

    with pytest.raises(SystemExit, match=r"--strengths must be whole numbers of at least 1, got \[-4, 1\]"):
        main(
            ["pilot", "--config", "demo", "--plan", "p.yaml", "--plan-seed", "9999", "--strengths", "-4", "1"]
            + ["--data-dir", str(data_dir)]
        )
