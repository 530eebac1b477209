"""Flags whose value is a mapping (--method-settings, --task-overrides): inline JSON, inline YAML or a
file of either, on every command that has them; anything else is refused in one line naming the flag."""

import json

import pytest
from helpers import tiny_grid_config

from harness.cli.main import main, parser
from harness.grid.configuration import resolve
from harness.grid.configuration.config import load_config

SETTINGS = {"test-time-rl": {"samples": 2}}


@pytest.mark.parametrize("command", ["run", "calibrate"])
def test_method_settings_take_json_yaml_and_files(command, tmp_path):
    (tmp_path / "s.json").write_text(json.dumps(SETTINGS))
    (tmp_path / "s.yaml").write_text("test-time-rl:\n  samples: 2\n")
    argv = ["run"] if command == "run" else ["contamination", "calibrate"]
    for value in (
        json.dumps(SETTINGS),
        "{test-time-rl: {samples: 2}}",
        str(tmp_path / "s.json"),
        str(tmp_path / "s.yaml"),
    ):
        args = parser().parse_args([*argv, "--config", "demo", "--method-settings", value])
        assert args.method_settings == SETTINGS, value
    assert parser().parse_args([*argv, "--config", "demo", "--method-settings", "{}"]).method_settings == {}
    overrides = parser().parse_args([*argv, "--config", "demo", "--task-overrides", "{trec: {epochs: 3}}"])
    assert overrides.task_overrides == {"trec": {"epochs": 3}}


@pytest.mark.parametrize(
    "value, said",
    [
        ("[1, 2]", "reads as list, not a mapping"),
        ("samples", "'samples' is not a file and reads as str, not a mapping"),
        ("{samples: [", "neither JSON nor YAML"),
    ],
)
def test_a_value_that_is_no_mapping_is_refused_naming_the_flag(value, said, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--config", "demo", "--method-settings", value])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "argument --method-settings" in err and said in err


def test_a_run_reads_the_methods_settings_from_the_flag(tmp_path, tiny_llama, data_dir):
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out", method="test-time-rl")
    args = parser().parse_args(
        ["run", "--config", str(config), "--method-settings", '{"test-time-rl": {"samples": 3}}']
    )
    from harness.cli.run import config_keys

    cfg = load_config(config, config_keys(args))
    assert resolve.method_settings(cfg).samples == 3
    assert resolve.method_settings(load_config(config)).samples == 8  # the file alone: the default
