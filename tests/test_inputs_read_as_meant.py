"""Inputs read as the user meant them, and output any strict parser reads."""

import json
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.grid.configuration import resolve
from harness.grid.configuration.config import load_config


def test_a_number_in_exponent_form_is_a_number_in_a_config(tmp_path):
    """YAML 1.1 reads `2e-3` as a string; a config means the number, as `train --lr 2e-3` does."""
    path = tmp_path / "c.yaml"
    path.write_text("tasks: [ag_news]\nmethod_settings:\n  prompt-tapt: {lr: 2e-3, epochs: 1E0}\n")
    cfg = load_config(path, {"data_dir": "tests/data"})
    settings = resolve.method_settings(cfg)
    assert (settings.lr, settings.epochs) == (0.002, 1.0)
    path.write_text("tasks: [ag_news]\nmethod_settings:\n  prompt-tapt: {lr: 2e-3x}\n")
    with pytest.raises(Exception, match="must be a number, got '2e-3x'"):
        resolve.method_settings(load_config(path, {"data_dir": "tests/data"}))


def refuse(constant):
    raise ValueError(f"{constant} is not JSON")


def test_summarize_json_is_strict_json(tmp_path, capsys):
    """An MDE of inf and an unbounded interval are null, not Infinity (which Node's JSON.parse refuses)."""
    import pandas as pd

    d = tmp_path / "m10" / "n10" / "toy" / "a"
    d.mkdir(parents=True)
    columns = ["base", "extra", "test", "majority", "num_classes", "majority_all"]
    rows = pd.DataFrame([[0.5, 0.6, 0.7, 0.3, 2, 0.5]] * 2, columns=columns)
    rows.to_csv(d / "accuracies.csv", index=False)
    main(["summarize", str(tmp_path), "--json"])
    out = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert out["configs"][0]["detectable_bias"] is None and out["configs"][0]["bias_high"] is None


def test_summarize_and_report_expand_the_home_folder(tmp_path, monkeypatch, capsys):
    import pandas as pd

    monkeypatch.setenv("HOME", str(tmp_path))
    d = tmp_path / "res" / "m10" / "n10" / "toy" / "a"
    d.mkdir(parents=True)
    columns = ["base", "extra", "test", "majority", "num_classes", "majority_all"]
    rows = pd.DataFrame([[0.5, 0.6, 0.7, 0.3, 2, 0.5]] * 2, columns=columns)
    rows.to_csv(d / "accuracies.csv", index=False)
    main(["summarize", "~/res"])
    assert "m=10 n=10 model=toy" in capsys.readouterr().out
    main(["report", "~/res"])
    assert (tmp_path / "res" / "report.html").is_file()


def test_prompt_tapt_on_an_encoder_is_refused_before_anything_trains(tmp_path, tiny_bert, data_dir):
    out = tmp_path / "a"
    with pytest.raises(SystemExit) as raised:
        main(
            ["train", "--task", "ag_news", "--m", "4", "--n", "8", "--base", str(tiny_bert)]
            + ["--data-dir", str(data_dir), "--out", str(out)]
        )
    said = str(raised.value.code)  # the one line tapt-bench exits with
    assert "is an encoder, and --method prompt-tapt trains and scores prompts" in said
    assert "--method raw-text" in said and not out.exists()


def test_a_config_of_zero_epochs_is_refused_before_it_runs(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("tasks: [ag_news]\nmethod_settings:\n  prompt-tapt: {epochs: 0}\n")
    with pytest.raises(Exception, match="key 'epochs' must be above 0.0, got 0.0"):
        resolve.method_settings(load_config(path, {"data_dir": "tests/data"}))


@pytest.mark.parametrize("command", [["run", "--config", "demo"], ["train", "--task", "ag_news"]])
def test_an_empty_out_is_refused_not_read_as_the_current_folder(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match="--out is empty: name a path"):
        main([*command, "--data-dir", str(Path(__file__).parent / "data"), "--out", ""])
    assert list(tmp_path.iterdir()) == []


def test_validate_refuses_the_unedited_template_of_tasks_new(tmp_path, capsys):
    main(["tasks", "new", "mine", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        main(["tasks", "validate", str(tmp_path / "tapt_mine.yaml"), "--data-dir", str(tmp_path)])
    shown = capsys.readouterr().out
    assert "dataset_kwargs classes, instruction, hub_id still hold what `tasks new` wrote" in shown


def read_only(monkeypatch):
    """Every new folder refused as on a read-only file system (EROFS): root writes through a chmod."""
    import errno
    import tempfile

    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkdtemp", refuse)


@pytest.mark.parametrize(
    "command",
    [
        ["tasks", "new", "mine"],
        ["train", "--task", "ag_news"],
        ["train", "--task", "ag_news", "--method", "raw-text"],
    ],
)
def test_an_out_on_a_read_only_file_system_is_one_line_and_nothing_runs(command, tmp_path, monkeypatch):
    read_only(monkeypatch)
    with pytest.raises(SystemExit, match="--out .*cannot create a folder in .*Read-only file system"):
        main(
            [
                *command,
                "--out",
                str(tmp_path / "sub"),
                *(["--data-dir", "tests/data"] if "train" in command else []),
            ]
        )
    assert not (tmp_path / "sub").exists()


def test_a_config_not_in_utf8_names_its_line_and_the_fix(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes("tasks: [ag_news]\nnotes: caf\xe9\n".encode("latin-1"))
    with pytest.raises(Exception, match="c.yaml: line 2 is not UTF-8 \\(byte 0xe9\\): save it as UTF-8"):
        load_config(path, {"data_dir": "tests/data"})


def test_train_gives_torch_the_free_cores_as_run_does(tmp_path, tiny_llama, data_dir, monkeypatch):
    """Beside a busy program a step took 55 s against 7.5 s with one thread: train measures the free
    cores before it trains, as run does before each unit."""
    import torch

    from harness.core.engine import threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "free_cores", lambda: 1)
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # what torch takes on a 2-core host: the guard must bring it to the free 1
    try:
        main(
            [
                "train",
                "--task",
                "ag_news",
                "--m",
                "4",
                "--n",
                "6",
                "--quantize",
                "none",
                "--base",
                str(tiny_llama),
            ]
            + ["--data-dir", str(data_dir), "--out", str(tmp_path / "a")]
        )
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_calibrate_read_only_on_units_without_the_leak_names_what_they_lack(tmp_path, tiny_llama, data_dir):
    """A grid run without the leak and the exposure test: calibrate --train false finds none of its units
    usable and says why, not only that none is there."""
    import json as js

    from helpers import tiny_grid_config

    from harness import results

    out = tmp_path / "out"
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, out)
    settings = {"m": 4, "n": 6}  # no leak, no exposure test: the default conditions, unrecorded as a run does
    tdir = out / "m4" / "n6" / "tiny" / "ag_news"
    results.write_json(
        tdir / "units" / "0.json", {"subsample": 0, "settings": settings, "settings_hash": "x"}
    )
    with pytest.raises(SystemExit) as raised:
        main(f"contamination calibrate --config {config} --modes padding --train false".split())
    said = str(raised.value.code)
    assert "nothing to calibrate" in said and "no exposure test" in said
    assert "conditions ['base', 'extra', 'test'] (calibrate reads ['base', 'extra', 'test', 'leak'])" in said
    assert js.loads((tdir / "units" / "0.json").read_text())["subsample"] == 0  # nothing written or removed


def test_lm_eval_takes_the_embedded_default_by_its_name():
    """`lm_eval --model_args pretrained=SmolLM2-135M-Instruct`: the name of the embedded default is read
    as its prepared folder (`tapt-bench models prepare` makes it), not looked up on the hub."""
    from types import SimpleNamespace

    from harness.core.engine import models
    from harness.scoring.lm_eval_registration import pretrained_from_adapter

    class HFLM:
        def __init__(self, pretrained=None, **kwargs):
            self.pretrained = pretrained

        def get_model_info(self):
            return {}

    fake = SimpleNamespace(HFLM=HFLM)
    pretrained_from_adapter(fake)
    model = fake.HFLM(pretrained=models.SMOLLM2)
    assert model.pretrained == models.resolve(models.SMOLLM2) and Path(model.pretrained).is_dir()
    assert fake.HFLM(pretrained="some/hub-id").pretrained == "some/hub-id"


def test_a_flag_of_another_method_names_where_to_look(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--task", "ag_news", "--method", "raw-text", "--packing", "--out", "x"])
    said = capsys.readouterr().err
    assert "unrecognized arguments: --packing (--packing: a setting of another command or method;" in said
    assert "`tapt-bench train --method NAME --help` a method's" in said


def test_a_misspelt_task_override_suggests_the_nearest_setting(tmp_path):
    from harness.grid.configuration.run_checks import load_run

    path = tmp_path / "c.yaml"
    path.write_text(f"tasks: [ag_news]\nout: {tmp_path / 'o'}\ntask_overrides:\n  ag_news: {{epoch: 2}}\n")
    with pytest.raises(
        Exception,
        match="ag_news: \\['epoch'\\] cannot be set per task \\('epoch': did you mean 'epochs'\\?\\)",
    ):
        load_run(path, {"data_dir": "tests/data"})


@pytest.mark.parametrize(
    "argv, said",
    [
        (
            ["run", "--config", "demo", "--shard", "-1/2"],
            "--shard -1/2: i must be 0 to N - 1 (for N = 2: 0/2, 1/2)",
        ),
        (["train", "--task", "ag_news", "--out", "x", "--lr", "-1e-4"], "lr must be above 0"),
    ],
)
def test_a_value_that_starts_with_a_minus_reaches_its_settings_check(argv, said, capsys):
    """argparse takes `-1/2` for a flag ("expected one argument"): the value is the setting's to judge."""
    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert said in capsys.readouterr().err + str(raised.value.code)


def test_a_word_after_an_on_off_flag_says_what_the_flag_takes(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--config", "demo", "--exposure", "maybe"])
    said = capsys.readouterr().err
    assert "unrecognized arguments: maybe (--exposure is on or off: --exposure, --no-exposure, or" in said
