"""A task a user brings: one YAML in their own folder (outside the package), with a CSV in its own
column names and string labels, used by slug everywhere."""

import json
import shlex
import subprocess
import sys

import pandas as pd
import pytest

import harness
from harness.cli.main import main
from harness.core.plumbing.errors import TaskError
from harness.tasks.data import load_pool
from harness.tasks.spec import TASKS_DIR, load_spec

YAML = f"""include: {TASKS_DIR / "_template_yaml"}
task: tapt_weather
dataset_kwargs:
  slug: weather
  hub_id: someone/weather
  text_field: forecast
  label_field: tone
  classes: &classes [calm, stormy]
  instruction: The text is a forecast. Answer with its tone.
doc_to_choice: *classes
"""


@pytest.fixture
def user(tmp_path):
    tasks, data = tmp_path / "my_tasks", tmp_path / "my_data"
    tasks.mkdir()
    (tasks / "tapt_weather.yaml").write_text(YAML)
    (data / "weather").mkdir(parents=True)
    rows = [
        (
            f"forecast {i}: {'gale warning, heavy rain' if i % 3 == 0 else 'light breeze, sunny'}",
            "stormy" if i % 3 == 0 else "calm",
        )
        for i in range(60)
    ]
    pd.DataFrame(rows, columns=["forecast", "tone"]).to_csv(data / "weather" / "data.csv", index=False)
    return {"tasks": str(tasks), "data": str(data)}


def test_its_own_columns_and_string_labels_become_text_and_class_indices(user):
    pool = load_pool(load_spec("weather", [user["tasks"]]), user["data"])
    assert list(pool.columns) == ["text", "label"] and pool["label"].tolist()[:4] == [1, 0, 0, 1]
    assert pool["text"][0] == "forecast 0: gale warning, heavy rain"


def test_a_label_outside_the_classes_is_named(user, tmp_path):
    path = tmp_path / "my_data" / "weather" / "data.csv"
    pd.read_csv(path).replace({"tone": {"calm": "windy"}}).to_csv(path, index=False)
    with pytest.raises(TaskError, match=r"label 'windy' is not one of \['calm', 'stormy'\] \(40 row\(s\)\)"):
        load_pool(load_spec("weather", [user["tasks"]]), user["data"])


@pytest.mark.xdist_group("lm_eval_index")  # lm-eval's own task index: built once, in one worker
def test_validate_and_show_by_slug(user, capsys):
    main(["tasks", "validate", user["tasks"], "--data-dir", user["data"], "--m", "6", "--n", "20"])
    assert "1 ok, 0 with problems" in capsys.readouterr().out
    main(
        [
            *"tasks show --task weather --include-path".split(),
            user["tasks"],
            "--data-dir",
            user["data"],
            *"--m 6 --n 20".split(),
        ]
    )
    shown = capsys.readouterr()
    assert (
        "calm\nstormy\n\nThe text is a forecast. Answer with its tone." in shown.out
        and "### Text: forecast " in shown.out
    )
    assert "Custom kwargs can be passed to `--metadata`" not in shown.out + shown.err  # lm-eval's banner
    with pytest.raises(SystemExit) as err:
        main(
            [
                "tasks",
                "show",
                "--task",
                "weather",
                "--include-path",
                user["tasks"],
                "--data-dir",
                user["data"],
            ]
        )
    assert "exceeds the pool" in str(err.value) and "lm_eval" not in str(err.value)  # tapt-bench's own words
    with pytest.raises(SystemExit, match="unknown task 'weather'.*add its folder with --include-path"):
        main(["tasks", "show", "--task", "weather", "--data-dir", user["data"]])


def test_lm_eval_indexes_it_as_a_member_of_tapt_all(user):
    from lm_eval.tasks import TaskManager

    index = TaskManager(include_path=[str(TASKS_DIR), user["tasks"]], include_defaults=False).task_index
    assert "tapt_weather" in index["tapt_tasks"].tags and index["tapt_all"].cfg["task"] == ["tapt_tasks"]


def test_a_task_defined_in_two_folders_is_an_error_naming_both(user, tmp_path):
    twin = tmp_path / "twin"
    twin.mkdir()
    (twin / "tapt_weather_copy.yaml").write_text(YAML)
    with pytest.raises(
        TaskError,
        match="task tapt_weather is defined twice: .*tapt_weather.yaml and .*tapt_weather_copy.yaml",
    ):
        load_spec("weather", [user["tasks"], str(twin)])


@pytest.mark.slow
def test_train_by_slug_prints_the_lm_eval_command_that_scores_it(user, tiny_llama, tmp_path, capsys):
    main(
        [
            *"train --task weather --split test --include-path".split(),
            user["tasks"],
            "--data-dir",
            user["data"],
            *"--m 6 --n 10 --base".split(),
            str(tiny_llama),
            *"--quantize none --out".split(),
            str(tmp_path / "ad"),
        ]
    )
    command = capsys.readouterr().out.strip().splitlines()[-1]
    argv = shlex.split(command)
    assert argv[0] == "lm_eval" and f"peft={tmp_path / 'ad'}" in command and user["tasks"] in argv
    meta = json.loads(argv[argv.index("--metadata") + 1])
    assert meta == {"data_dir": user["data"], "m": 6, "n": 10, "seed": 0, "subsample": 0, "split": "test"}
    done = subprocess.run(
        [sys.executable, "-m", "lm_eval", *argv[1:], "--output_path", str(tmp_path / "eval")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(next((tmp_path / "eval").rglob("results_*.json")).read_text())
    assert results["n-samples"]["tapt_weather"]["effective"] == 10


def test_a_one_task_grid_by_slug(user, tiny_llama, tmp_path):

    path = tmp_path / "grid.yaml"
    path.write_text(
        json.dumps(
            {
                "base": str(tiny_llama),
                "model_tag": "tiny",
                "tasks": ["weather"],
                "m": 6,
                "n": 10,
                "subsamples": 1,
                "quantize": "none",
                "include_path": [user["tasks"]],
                "data_dir": user["data"],
                "out": str(tmp_path / "out"),
            }
        )
    )
    harness.run(path)
    acc = pd.read_csv(tmp_path / "out" / "m6" / "n10" / "tiny" / "weather" / "accuracies.csv")
    assert len(acc) == 1 and acc["num_classes"].tolist() == [2]


@pytest.mark.parametrize(
    "name, content, said",
    [
        ("data.csv", b"", "data.csv: is empty: write a header row"),
        (
            "data.csv",
            "forecast,tone\ncaf\xe9 calm,calm\n".encode("latin-1"),
            "line 2 is not UTF-8 .*save the file as UTF-8",
        ),
        (
            "data.jsonl",
            b'{"forecast": "a", "tone": "calm"}\n{"forecast": "b", tone}\n',
            "line 2, column 19: not JSON",
        ),
        ("data.csv", b"forecast,tone\na,calm\nb,\n", "row 1 has an empty label"),
    ],
)
def test_a_bad_data_file_is_named_with_its_line_and_the_fix(user, tmp_path, name, content, said):
    folder = tmp_path / "my_data" / "weather"
    (folder / "data.csv").unlink()
    (folder / name).write_bytes(content)
    spec = load_spec("weather", [user["tasks"]])
    with pytest.raises(TaskError, match=said):
        load_pool(spec, user["data"])


@pytest.mark.parametrize(
    "classes, said", [("[calm, calm]", "names 'calm' more than once"), ("[calm]", "names fewer than 2")]
)
def test_classes_named_twice_or_alone_are_refused(user, classes, said):
    from pathlib import Path

    path = Path(user["tasks"]) / "tapt_weather.yaml"
    path.write_text(YAML.replace("[calm, stormy]", classes))
    with pytest.raises(TaskError, match=f"dataset_kwargs classes {said}"):
        load_spec("weather", [user["tasks"]])
