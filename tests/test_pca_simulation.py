"""The PCA simulation: fitting PCA on the test features biases R^2 only when the features' variance
is spread over many directions."""

import json

from harness.cli.main import main
from harness.stats.bayes.pca_simulation import PcaSettings, simulate


def test_no_bias_at_effective_rank_1_and_a_clear_one_at_full_rank():
    low, mid, full = simulate(PcaSettings(ranks=[1, 8, 20], subsamples=1000))
    assert abs(low["bias"]) < 0.002 and low["ci95"][0] < 0.002
    assert full["ci95"][0] > 0.003 and full["bias"] > 0.01, full
    assert full["r2_test"] > full["r2_extra"]
    assert low["ci95"][1] < mid["ci95"][0] and mid["ci95"][1] < full["ci95"][0], (low, mid, full)  # it rises


def test_cli_json_and_plot(tmp_path, capsys):
    main([*"simulate pca --ranks 1 10 --subsamples 200 --json --plot".split(), str(tmp_path / "p.png")])
    out = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in out["ranks"]] == [1, 10] and out["settings"]["subsamples"] == 200
    assert set(out["ranks"][0]) == {"rank", "r2_extra", "r2_test", "bias", "ci95"}
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_ranks_the_features_cannot_have_are_refused(capsys):
    import pytest

    for rank in ("0", "50"):
        with pytest.raises(SystemExit, match=r"--ranks must each be between 1 and --features \(20\)"):
            main(["simulate", "pca", "--ranks", rank])
