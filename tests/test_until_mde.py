"""`tapt-bench run --until-mde`: rounds of one subsample per task and method, each method stopped on its
pooled MDE, never on its p-value."""

import pytest

from harness.cli.main import main
from harness.grid.configuration import resolve
from harness.grid.configuration.config import GridConfig
from harness.study import rounds


def test_each_method_stops_on_its_own_mde_and_the_methods_keep_the_same_subsamples(monkeypatch):
    cfg = GridConfig(tasks=["ag_news"], subsamples=6, methods=["prompt-tapt", "self-training"])
    ran: dict[str, list[int]] = {}  # the subsamples each method's rounds asked for

    def pooled(c):  # prompt TAPT's MDE never falls; self-training's is 20 / units
        units = len(ran.get(resolve.tag(c), []))
        falls = resolve.tag(c).endswith("+self-training") and units
        return (20 / units if falls else float("inf")), units

    monkeypatch.setattr(rounds, "pooled", pooled)
    said = []
    got = rounds.run_rounds(cfg, 5.0, lambda c, k: ran.setdefault(resolve.tag(c), []).append(k), said.append)
    plain, st = "SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct+self-training"
    assert ran == {plain: [1, 2, 3, 4, 5, 6], st: [1, 2, 3, 4]}
    assert got == {f"{plain} m100 n100": (float("inf"), 6), f"{st} m100 n100": (5.0, 4)}
    assert f"{st} (m 100, n 100): stops at MDE 5.00 pts over 4 units" in said
    assert said[-1] == f"{plain} (m 100, n 100): MDE inf pts over 6 units, still above 5"


def test_the_pooled_mde_is_the_summarys(tmp_path):
    from pathlib import Path

    import yaml

    from harness.core.plumbing.settings import from_mapping
    from harness.grid.configuration.config import config_path

    records = Path(__file__).resolve().parents[1] / "studies" / "methods_study"
    raw = yaml.safe_load(config_path("methods_study").read_text())
    cfg = from_mapping(GridConfig, raw | {"out": str(records)}, "methods_study")
    (self_training,) = [c for c in cfg.run_configs() if resolve.tag(c).endswith("+self-training")]
    model_dir = resolve.folder
    from harness.results import collect
    from harness.stats.summary.summary import summarize

    (summary,) = summarize(collect(model_dir(self_training)))["configs"]
    expected = (100 * summary["detectable_bias"], summary["bias_units"])
    assert rounds.pooled(self_training) == expected and expected[1] >= 6
    assert rounds.pooled(self_training.replace(out=str(tmp_path))) == (float("inf"), 0)


def test_a_method_that_meets_the_target_already_runs_nothing_more(monkeypatch):
    cfg = GridConfig(tasks=["ag_news"], subsamples=6)
    monkeypatch.setattr(rounds, "pooled", lambda c: (4.0, 12))
    ran = []
    assert rounds.run_rounds(cfg, 5.0, lambda c, k: ran.append(c), lambda line: None) == {
        "SmolLM2-135M-Instruct m100 n100": (4.0, 12)
    }
    assert ran == []


def test_rounds_read_the_summary_of_every_unit_so_they_take_no_shard(tmp_path):
    with pytest.raises(SystemExit, match="--until-mde reads the summary of every unit between rounds"):
        main(["run", "--config", "demo", "--until-mde", "5", "--shard", "0/2", "--out", str(tmp_path / "o")])
    assert not (tmp_path / "o").exists()
