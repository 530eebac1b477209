"""Every setting's bounds live in its settings class and are checked before anything loads, naming our
key: finite numbers everywhere, positive temperatures, ranks of at least 1, CoDeC's context no larger
than a split allows, a flag the chosen method does not read refused rather than dropped."""

import pytest
from helpers import tiny_grid_config

from harness.cli.main import main
from harness.core.plumbing.errors import SettingsError
from harness.grid.configuration.run_checks import load_run
from tapt.methods.test_time_rl import TtrlSettings
from tapt.methods.tlm import TlmSettings


@pytest.mark.parametrize(
    "cls, values, said",
    [
        (TtrlSettings, {"temperature": 0}, "'temperature' must be above 0.0, got 0.0"),
        (TtrlSettings, {"completion_tokens": -5}, "'completion_tokens' must be at least 0, got -5"),
        (TtrlSettings, {"lora_r": 0}, "'lora_r' must be at least 1, got 0"),
        (TtrlSettings, {"warmup_ratio": 1.0}, "'warmup_ratio' must be below 1.0"),
        (TlmSettings, {"threshold": float("nan")}, "'threshold' must be a finite number, got nan"),
        (TlmSettings, {"threshold": -1000}, "'threshold' must be at least 0.0, got -1000.0"),
        (TlmSettings, {"lr": float("inf")}, "'lr' must be a finite number, got inf"),
    ],
)
def test_a_setting_out_of_bounds_is_refused_naming_its_key(cls, values, said):
    with pytest.raises(SettingsError) as err:
        cls(**values)
    assert said in f"'{err.value.key}' {err.value.problem}"


def test_codec_context_is_bounded_by_the_documents_a_split_holds(tmp_path, tiny_llama, data_dir):
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "o")  # n 6: 5 others a document
    assert load_run(config, {"codec_context": 5}).grid.codec_context == 5
    with pytest.raises(SettingsError, match="--codec-context is 6, .* set at most 5"):
        load_run(config, {"codec_context": 6})


def test_train_reads_another_methods_flags_and_refuses_prompt_tapts(tmp_path, data_dir, capsys):
    """With --method, train's flags are that method's settings: prompt TAPT's --packing is not one of
    test-time RL's, and test-time RL's own --lr is held to its own bounds."""
    argv = f"train --task rotten_tomatoes --m 2 --n 6 --data-dir {data_dir} --out {tmp_path / 'a'}".split()
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--method", "test-time-rl", "--packing"])
    assert exit_.value.code == 2 and "unrecognized arguments: --packing" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--lr must be above 0.0, got 0"):
        main([*argv, "--method", "test-time-rl", "--lr", "0"])
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("target", ["0", "nan", "-5", "inf"])
def test_summarize_refuses_a_target_that_is_not_a_positive_number(target, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["summarize", str(tmp_path), "--target", target])
    assert exit_.value.code == 2 and "argument --target" in capsys.readouterr().err
