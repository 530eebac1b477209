"""`tapt-bench tasks validate` on broken task YAMLs: each problem is named with its fix."""

import pandas as pd
import pytest

from harness.cli.main import main
from harness.tasks.spec import TASKS_DIR

GOOD = f"""include: {TASKS_DIR / "_template_yaml"}
task: tapt_toy
dataset_kwargs:
  slug: toy
  hub_id: someone/toy
  classes: &classes [neg, pos, neutral]
  instruction: The text is a remark. Answer with its tone.
doc_to_choice: *classes
"""


def write_task(tmp_path, yaml_text=GOOD, rows=None):
    rows = (
        rows
        if rows is not None
        else {"text": [f"remark {i}" for i in range(60)], "label": [i % 3 for i in range(60)]}
    )
    (tmp_path / "data" / "toy").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(tmp_path / "data" / "toy" / "data.parquet")
    path = tmp_path / "tapt_toy.yaml"
    path.write_text(yaml_text)
    return path


def validate(capsys, path, *extra):
    with pytest.raises(SystemExit) as exit_:
        main(["tasks", "validate", str(path), "--data-dir", str(path.parent / "data"), *extra])
    return exit_.value.code, capsys.readouterr().out


def test_a_good_task_passes(tmp_path, capsys):
    path = write_task(tmp_path)
    main(["tasks", "validate", str(path), "--data-dir", str(tmp_path / "data"), "--m", "6", "--n", "20"])
    assert "1 ok, 0 with problems" in capsys.readouterr().out


@pytest.mark.parametrize(
    "yaml_text, rows, args, expected",
    [
        ("task: [unclosed\n", None, [], "malformed YAML"),
        (GOOD + "doc_to_txt: prompt\n", None, [], "unknown field(s) ['doc_to_txt']"),
        (
            GOOD.replace("  slug: toy", "  slug: toy\n  text_colum: body"),
            None,
            [],
            "unknown field(s) ['text_colum'] in dataset_kwargs",
        ),
        (GOOD, {"body": ["a"] * 60, "label": [i % 3 for i in range(60)]}, [], "missing column(s) ['text']"),
        (GOOD, {"text": ["a"] * 60}, [], "missing column(s) ['label']"),
        (
            GOOD,
            {"text": ["a"] * 59 + [" "], "label": [i % 3 for i in range(60)]},
            [],
            "1 missing or empty text(s), first at row 59",
        ),
        (
            GOOD,
            {"text": ["a"] * 60, "label": [(i % 3) * 2 for i in range(60)]},
            [],
            "labels [4] are not classes (0..2); classes [1] have no row",
        ),
        (
            GOOD,
            {"text": ["a"] * 60, "label": [i % 2 for i in range(60)]},
            [],
            "class-count mismatch: the data has 2 distinct labels [0, 1], the YAML names 3 classes",
        ),
        (GOOD, None, ["--m", "2", "--n", "10"], "m=2 is smaller than the number of classes (3)"),
        (GOOD, None, ["--m", "6", "--n", "40"], "m + 2n = 6 + 2*40 = 86 exceeds the pool of 60 rows"),
        (GOOD, {"text": [], "label": []}, [], "no rows: the data has a header but no labeled rows"),
        (
            GOOD,
            {"text": list(range(1600, 1660)), "label": [i % 3 for i in range(60)]},
            [],
            "column `text` holds numbers (dtype int64, first 1600), not texts",
        ),
    ],
    ids=[
        *"malformed unknown-field unknown-fact no-text no-label empty-text label-gap class-count".split(),
        *"m-too-small n-too-large no-rows numeric-text".split(),
    ],
)
def test_each_problem_is_explained(tmp_path, capsys, yaml_text, rows, args, expected):
    code, out = validate(capsys, write_task(tmp_path, yaml_text, rows), *args)
    assert code == 1 and "FAIL" in out and expected in out, out


def test_several_problems_are_all_reported(tmp_path, capsys):
    rows = {"text": ["a"] * 59 + [""], "label": [i % 2 for i in range(60)]}
    code, out = validate(capsys, write_task(tmp_path, GOOD + "doc_to_txt: prompt\n", rows))
    assert "unknown field(s)" in out and "missing or empty text" in out and "class-count mismatch" in out


def test_a_header_only_csv_says_no_rows(tmp_path, capsys):
    path = write_task(tmp_path)
    (tmp_path / "data" / "toy" / "data.parquet").unlink()
    (tmp_path / "data" / "toy" / "data.csv").write_text("text,label\n")
    code, out = validate(capsys, path)
    assert code == 1 and "no rows" in out and "class-count" not in out, out
