"""An --overwrite that takes no user's file, plug-ins whose output is checked and
whose failure is one line naming their file, and inputs that were silent or unclear, refused with the
key, flag or file named."""

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import tiny_grid_config

from contamination import detectors
from harness.cli.main import main
from harness.core.plumbing.errors import SettingsError, TaskError, UserError
from harness.core.plumbing.settings import against
from harness.grid.configuration.config import GridConfig
from harness.grid.configuration.run_checks import load_run
from harness.stats.summary import statistics
from tapt import output

HERE = Path(__file__).name  # the plug-ins below are defined in this file

SHIPPED = str(Path(__file__).resolve().parents[1] / "studies" / "methods_study")


def adapter(folder: Path, files: dict[str, str]) -> None:
    """What tapt-bench writes as an adapter, staged."""
    with output.staged(folder, overwrite=folder.exists()) as tmp:
        for name, text in files.items():
            (tmp / name).write_text(text)
        output.write_record(tmp, {"kind": "adapter"})


def test_overwrite_replaces_its_own_files_and_keeps_what_the_user_kept_beside_them(tmp_path):
    out = tmp_path / "adapter"
    adapter(out, {"adapter_model.safetensors": "old", "README.md": "old"})
    (out / "notes.txt").write_text("mine")
    (out / "eval_results").mkdir()
    (out / "eval_results" / "results.json").write_text("{}")
    adapter(out, {"adapter_model.safetensors": "new"})
    assert (out / "adapter_model.safetensors").read_text() == "new"
    assert not (out / "README.md").exists()  # written last time, not this time: gone
    assert (out / "notes.txt").read_text() == "mine" and (out / "eval_results" / "results.json").exists()
    assert json.loads((out / "tapt.json").read_text())["files"] == ["adapter_model.safetensors", "tapt.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["adapter"]  # no staging folder left


def test_overwrite_of_the_folder_above_the_working_one_keeps_the_working_folder(tmp_path, monkeypatch):
    parent = tmp_path / "parent"
    adapter(parent, {"adapter_model.safetensors": "old"})
    (parent / "child").mkdir()
    (parent / "child" / "user.txt").write_text("mine")
    monkeypatch.chdir(parent / "child")
    adapter(Path(".."), {"adapter_model.safetensors": "new"})
    assert (parent / "adapter_model.safetensors").read_text() == "new"
    assert (parent / "child" / "user.txt").read_text() == "mine"
    monkeypatch.chdir(parent)
    adapter(Path("."), {"adapter_model.safetensors": "newer"})  # `--out .` names the folder by its name
    assert (parent / "adapter_model.safetensors").read_text() == "newer"


def test_a_users_partial_folder_beside_a_new_output_is_left_alone(tmp_path):
    (tmp_path / "ad_p.partial").mkdir()
    (tmp_path / "ad_p.partial" / "keep.txt").write_text("mine")
    adapter(tmp_path / "ad_p", {"adapter_model.safetensors": "x"})
    assert (tmp_path / "ad_p.partial" / "keep.txt").read_text() == "mine"
    assert (tmp_path / "ad_p" / "adapter_model.safetensors").exists()


def test_report_refuses_a_file_it_did_not_write_and_names_a_folder_it_cannot_write(tmp_path, monkeypatch):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    with pytest.raises(SystemExit, match="notes.txt exists and is not a tapt-bench report"):
        main(["report", SHIPPED, "--out", str(notes)])
    assert notes.read_text() == "my notes"
    page = tmp_path / "page.html"
    main(["report", SHIPPED, "--out", str(page)])
    main(["report", SHIPPED, "--out", str(page)])  # its own page: replaced

    def read_only(path, data):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr("harness.results.atomic_write", read_only)
    with pytest.raises(SystemExit, match="cannot write .*page.html \\(Read-only file system\\); pass --out"):
        main(["report", SHIPPED, "--out", str(page)])


def test_a_misspelt_metadata_key_is_refused_and_the_models_own_arguments_pass():
    from tasks_yaml.utils import misspelt

    with pytest.raises(UserError, match="unknown --metadata key 'subsampel'; did you mean 'subsample'"):
        misspelt({"subsampel": 3, "n": 8}, "tapt_ag_news")
    misspelt(
        {"pretrained": "x", "peft": "y", "dtype": "bfloat16", "batch_size": 8, "trust_remote_code": 1}, "t"
    )


def plugin_detector(value):
    def pvalue(record, cond, texts):
        if isinstance(value, Exception):
            raise value
        return value

    return detectors.Detector(detectors.TEXT, pvalue)


@pytest.mark.parametrize(
    "value, message",
    [
        (2.0, "returned 2.0 \\(float\\); it must return a finite number in \\[0, 1\\]"),
        (math.nan, "returned nan \\(float\\); it must return a finite number in \\[0, 1\\]"),
        ("low", "returned 'low' \\(str\\)"),
        (ValueError("no scores"), "failed: ValueError: no scores; fix that file"),
    ],
)
def test_a_detectors_p_value_is_checked_and_its_failure_names_its_file(value, message, monkeypatch):
    monkeypatch.setattr(detectors, "DETECTORS", {"planted": plugin_detector(value)})
    with pytest.raises(UserError, match=f"detector 'planted' \\(.*{HERE}\\) {message}"):
        detectors.unit_pvalues({"tests": {"extra": {}}}, [])


@pytest.mark.parametrize(
    "value, message",
    [
        ("big", "returned 'big' \\(str\\); it must return a finite number"),
        (np.array([1.0, 2.0]), "returned array\\(\\[1., 2.\\]\\) \\(ndarray\\)"),
        (ZeroDivisionError("none"), "failed: ZeroDivisionError: none; fix that file"),
    ],
)
def test_a_statistics_value_is_checked_and_its_failure_names_its_file(value, message):
    def compute(treatment, control, seed):
        if isinstance(value, Exception):
            raise value
        return value

    planted = statistics.Statistic("planted_{e}", "planted", "points", lambda e: True, compute=compute)
    with pytest.raises(UserError, match=f"statistic 'planted_bias' \\(.*{HERE}\\) {message}"):
        planted.value("bias", np.ones(3), np.zeros(3), 0)


def test_a_task_named_twice_and_two_data_files_of_one_task_are_refused(tmp_path, tiny_llama, data_dir):
    with pytest.raises(SettingsError, match="tasks names ag_news more than once: name each task once"):
        GridConfig(tasks=["ag_news", "ag_news"])
    folder = tmp_path / "data"
    (folder / "ag_news").mkdir(parents=True)
    pd.read_parquet(data_dir / "ag_news" / "data.parquet").to_csv(folder / "ag_news" / "data.csv")
    (folder / "ag_news" / "data.jsonl").write_text("")
    config = tiny_grid_config(tmp_path, tiny_llama, folder, tmp_path / "out")
    with pytest.raises(TaskError, match="holds data.csv and data.jsonl; keep one file of the task's data"):
        load_run(config)


def test_a_home_folder_is_expanded_in_every_path(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert GridConfig(out="~/results", data_dir="~/data").grid.out == str(tmp_path / "results")
    assert GridConfig(data_dir="~/data").sample.data_dir == str(tmp_path / "data")
    assert against(Path("/elsewhere"), "~/x") == str(tmp_path / "x")


def test_an_lr_of_zero_is_refused_before_any_training(tmp_path, tiny_llama, data_dir):
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, tmp_path / "out", method_settings={"prompt-tapt": {"lr": 0}}
    )
    with pytest.raises(SettingsError, match="prompt-tapt: key 'lr' must be above 0.0, got 0.0"):
        load_run(config)


def test_an_unknown_method_key_lists_only_the_keys_that_may_be_set_there(tmp_path, tiny_llama, data_dir):
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, tmp_path / "out", method_settings={"prompt-tapt": {"lrr": 1}}
    )
    with pytest.raises(SettingsError, match="unknown key\\(s\\) \\['lrr'\\]") as err:
        load_run(config)
    assert (
        "'lr'" in str(err.value)
        and "quantize" not in str(err.value)
        and "fallback_lora" not in str(err.value)
    )


def test_a_pool_too_small_for_a_flags_n_names_the_flag(tmp_path, tiny_llama, data_dir):
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out")
    with pytest.raises(SystemExit, match="--n \\(over .*out.yaml\\): task 'ag_news'"):
        main(["run", "--config", str(config), "--n", "6000"])
    assert not (tmp_path / "out").exists()


def test_a_copy_of_the_base_in_another_folder_is_the_same_base(tmp_path, tiny_llama):
    import shutil

    from harness.scoring import lm_eval_registration as hook

    copy = tmp_path / "copy_of_base"
    shutil.copytree(tiny_llama, copy)
    from peft import LoraConfig

    peft = tmp_path / "adapter"
    LoraConfig(base_model_name_or_path=str(tiny_llama), task_type="CAUSAL_LM").save_pretrained(peft)
    hook.same_base(str(copy), str(peft))  # accepted: the same config and weights
    (copy / "config.json").write_text(json.dumps({**json.loads((copy / "config.json").read_text()), "x": 1}))
    with pytest.raises(UserError, match="the adapter was trained on"):
        hook.same_base(str(copy), str(peft))


def test_the_summary_says_how_far_each_conditions_model_moved(tiny_grid, capsys):
    import harness

    shown = harness.summarize(Path(tiny_grid)).text()
    assert "moved (norm)" in shown and "layers moved" in shown


def test_the_gpu_check_names_a_missing_model_folder_or_task_before_any_step(tmp_path, monkeypatch):
    from benchmarks import gpu_check

    for argv, said in [
        (["--config-from", "/nonexistent", "--tiny"], "error: --config-from '/nonexistent' not found"),
        (["--task", "no_such_task", "--tiny"], "error: --task 'no_such_task' is not a shipped task"),
    ]:
        monkeypatch.setattr(sys, "argv", ["gpu_check.py", *argv, "--out", str(tmp_path)])
        with pytest.raises(SystemExit) as exit:  # a message: the script ends with it and status 1
            gpu_check.main()
        assert isinstance(exit.value.code, str) and exit.value.code.startswith(said), exit.value.code
        assert not os.listdir(tmp_path)


def test_a_reference_that_reads_as_seen_is_worded_with_its_error_rate():
    from contamination.verdict import verdict

    result = {"alpha": 0.05, "names": {"test": "test", "extra": "extra"}, "calibrated": True}
    result["text"] = {"p_test": 0.6, "p_extra": 0.0477, "detectable": 0.1}
    (line,) = verdict(result)
    assert line == (
        "text of test: not seen; the text of the reference extra read as seen (p 0.0477 <= 0.05; a reference "
        "the model never saw reads so in 5% of checks)"
    )
