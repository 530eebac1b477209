"""Every benchmark script runs: each at its smoke size (`--smoke`) on the tiny models, so that a refactor
cannot break one silently. The figures they print mean nothing at this size; only that they print."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import tiny_grid_config

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
STUDIES = BENCHMARKS.parent / "studies"  # the shipped studies' records

pytestmark = pytest.mark.slow


def script(name: str, *argv: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *argv], capture_output=True, text=True, cwd=cwd
    )
    assert done.returncode == 0, f"{name}: {done.stderr[-3000:]}"
    return done.stdout


def test_every_benchmark_script_is_covered_here():
    covered = {
        "bayes_speed.py",
        "classifier_unit.py",
        "codec_blocks.py",
        "codec_retest.py",
        "compare_log_samples.py",
        "contamination_control.py",
        "contamination_speed.py",
        "dose_picture.py",
        "gpu_check.py",
        "inputs_probe.py",
        "input_cases.py",
        "interval_coverage.py",
        "leak_labels.py",
        "mlm_head.py",
        "table1_compare.py",
        "grid_throughput.py",
        "grpo_step.py",
        "pooled_rates.py",
        "prompt_once_speed.py",
        "ray_workers.py",
        "round_six_cases.py",  # inputs_probe.py's round six (its probes run by it)
        "shared_cores.py",
        "shifted_reference.py",
        "studies_map.py",  # tests/test_studies_map.py runs it
        "tapt_step.py",
        "ttrl_answers.py",
        "ttrl_premise.py",
        "tlm_moves.py",
        "unit_walk.py",
    }
    assert {p.name for p in BENCHMARKS.glob("*.py")} - {"__init__.py"} == covered


@pytest.mark.parametrize(
    "name, argv, printed",
    [
        ("contamination_speed.py", ["--base", "{llama}"], "max |logprob difference|"),
        ("contamination_control.py", ["--base", "{llama}", "--out", "{tmp}/control.json"], "base p="),
        ("prompt_once_speed.py", ["--base", "{llama}"], "trec "),
        ("tapt_step.py", ["--base", "{llama}"], "trainer tok/s"),
        ("classifier_unit.py", ["--bases", "{bert}", "{llama}"], "step on a"),
        ("bayes_speed.py", ["--results", "{reference}/accuracies/bert_gpt2"], "fast/nutpie"),
        ("shared_cores.py", ["--base", "{llama}"], "accuracies equal across every leg that finished: True"),
        ("ttrl_answers.py", ["--base", "{llama}"], "rotten_tomatoes "),
        ("tlm_moves.py", ["--base", "{llama}"], "rotten_tomatoes "),
        ("grpo_step.py", ["--base", "{llama}"], "  8 grouped "),
        ("interval_coverage.py", ["--reference", "{reference}"], "the study's BERT units at m 50 / n 50"),
        ("mlm_head.py", [], "ag_news              fitted"),
        ("leak_labels.py", ["--base", "{bert}"], "ag_news"),
        ("ttrl_premise.py", ["--base", "{llama}"], "| arithmetic | N 4, T 1, budget 16 |"),
    ],
)
def test_a_benchmark_runs_at_its_smoke_size(
    name, argv, printed, tiny_llama, tiny_bert, real_data_dir, reference_dir, tmp_path
):
    paths = {"llama": tiny_llama, "bert": tiny_bert, "reference": reference_dir, "tmp": tmp_path}
    argv = [a.format(**paths) for a in argv]
    offline = ("bayes_speed.py", "interval_coverage.py", "ttrl_premise.py")  # read no data dir
    data = [] if name in offline else ["--data-dir", str(real_data_dir)]
    assert printed in script(name, "--smoke", *data, *argv)


def test_the_codec_blocks_benchmark_reads_a_tiny_grids_kept_adapters(tmp_path, tiny_llama, data_dir):
    from harness.cli.main import main

    out = tmp_path / "grid"
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, out, subsamples=1, codec_context=1)
    main(["run", "--config", str(config), "--keep-adapters"])
    printed = script("codec_blocks.py", "--results", str(out), "--data-dir", str(data_dir), "--limit", "2")
    assert "blocks" in printed and "x); blocks" in printed and "prompt-tapt" in printed


def test_the_gpu_checks_cpu_part_passes_every_step_on_a_tiny_model(tmp_path, data_dir):
    shown = script(
        "gpu_check.py", "--tiny", "--data-dir", str(data_dir), "--task", "ag_news", "--out", str(tmp_path)
    )
    assert "5 of 5 steps passed" in shown
    assert "four methods: leak, stream, exposure, CoDeC k 1        0" in shown


def test_the_throughput_benchmarks_cpu_part_runs_two_legs_that_predict_alike(tmp_path, data_dir):
    shown = script(
        "grid_throughput.py", "--tiny", "--units", "4", "--data-dir", str(data_dir), "--out", str(tmp_path)
    )
    assert "steady throughput, chosen over one worker" in shown
    same = re.search(
        r"units in both legs: 2, .*: the same prediction on ([\d.]+)%, .* gap ([\d.e+-]+)", shown
    )
    assert float(same.group(1)) > 99 and float(same.group(2)) < 1e-4  # threads differ between the legs


def test_the_throughput_benchmarks_classifier_part_runs_both_backbones_in_two_legs_that_predict_alike(
    tmp_path, data_dir
):
    shown = script(
        "grid_throughput.py", "--flow", "classifier", "--tiny", "--units", "4", "--data-dir", str(data_dir),
        "--out", str(tmp_path),
    )  # fmt: skip
    for backbone in ("bert", "gpt2"):
        table = shown.split(f"\n{backbone}:\n")[1]
        assert re.search(r"chosen\s+2\s+4 ", table) and re.search(r"one\s+1\s+2 ", table), table
        same = re.search(
            r"units in both legs: 2, .*: the same prediction on ([\d.]+)%, .* gap ([\d.e+-]+)", table
        )
        assert float(same.group(1)) > 99 and float(same.group(2)) < 1e-4, table
    assert "the 13500-unit grid at the chosen rate" in shown  # Table 1's grid, projected per backbone


def test_the_ray_benchmark_runs_a_tiny_config(tmp_path, tiny_llama, data_dir):
    pytest.importorskip("ray")
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "grid")
    assert "2 units at a time" in script("ray_workers.py", "--config", str(config))


def test_the_shifted_reference_benchmark_reads_a_tiny_grid(tmp_path, tiny_llama, data_dir):
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, tmp_path / "grid", tasks=["rotten_tomatoes"], subsamples=1
    )
    shown = script(
        "shifted_reference.py", "--smoke", "--config", str(config), "--out", str(tmp_path / "grid")
    )
    assert "never saw them             prefix" in shown and "SEEN after" in shown


def test_compare_log_samples_reads_two_runs(tmp_path):
    sample = {"doc_id": 0, "resps": [[["-1.5", "False"]], [["-0.5", "True"]]], "acc": 1.0}
    for run in ("one", "two"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "samples_tapt_trec_2026.jsonl").write_text(json.dumps(sample) + "\n")
    shown = script(
        "compare_log_samples.py", str(tmp_path / "one"), str(tmp_path / "two"), "--task", "tapt_trec"
    )
    assert "max |ll difference| 0.00e+00" in shown and "same acc 1/1" in shown


def test_codec_retest_gives_records_of_the_old_test_the_block_test_the_shipped_ones_carry(tmp_path):
    """A shipped unit stripped of its blocks and given the document test again, as written before, is
    rewritten to the shipped record to the byte; the null model's blocks come back too."""
    import shutil

    from contamination.exposure import codec_test

    model = "SmolLM2-135M-Instruct+self-training"  # units with null models
    shipped = STUDIES / "methods_study" / "m8" / "n32" / model / "trec"
    tdir = tmp_path / "m8" / "n32" / model / "trec"
    shutil.copytree(shipped, tdir)
    import pandas as pd

    for path in [*tdir.glob("units/*.json"), *tdir.glob("null/*.json")]:
        record = json.loads(path.read_text())
        exposure = record.get("exposure", record)
        for cond, scores in (
            exposure["scores"].items() if "docs" in exposure else [("null", exposure["scores"])]
        ):
            scores.pop("codec_block")
            if "tests" in exposure:
                df = pd.DataFrame(scores | exposure["docs"])
                exposure["tests"][cond]["codec"] = codec_test(df, 0)
        path.write_text(json.dumps(record, indent=1))
    printed = script("codec_retest.py", str(tmp_path))
    assert "trec: 8 units, 8 null models retested" in printed
    for path in [*tdir.glob("units/*.json"), *tdir.glob("null/*.json")]:
        assert path.read_bytes() == (shipped / path.parent.name / path.name).read_bytes(), path


def test_pooled_rates_count_the_base_once_on_the_shipped_studies():
    printed = script("pooled_rates.py", str(STUDIES / "methods_study"), str(STUDIES / "methods_study_tlm"))
    codec = next(line for line in printed.splitlines() if line.startswith("CoDeC |"))
    assert codec.startswith("CoDeC | 9/150 ") and "base alone 5/57 " in codec


def test_the_unit_walk_counts_the_package_changes_and_each_lookup_of_a_unit(data_dir):
    printed = script("unit_walk.py", "--data-dir", str(data_dir))
    walks = re.findall(r"(\d) adapted conditions: (\d+) package changes; lookups: (.*)", printed)
    assert [w[0] for w in walks] == ["2", "3"]
    assert int(walks[1][1]) > int(walks[0][1]) > 0  # a condition more is a walk longer
    assert all("read_old_keys 1," in w[2] and "find_spec 2," in w[2] for w in walks)


@pytest.mark.parametrize(
    "name, argv, said",
    [
        ("codec_retest.py", ["{tmp}/missing"], "codec_retest: .*missing: no such results folder"),
        ("codec_retest.py", ["{tmp}"], "codec_retest: .* holds no finished unit"),
        ("pooled_rates.py", ["{tmp}"], "pooled_rates: no calibration.json in .*contamination calibrate"),
        ("dose_picture.py", ["{tmp}/missing", "--out", "{tmp}/d.png"], "dose_picture: .*missing: no such"),
    ],
)
def test_a_benchmark_given_a_wrong_folder_says_so_in_one_line(tmp_path, name, argv, said):
    argv = [a.format(tmp=tmp_path) for a in argv]
    done = subprocess.run([sys.executable, str(BENCHMARKS / name), *argv], capture_output=True, text=True)
    assert done.returncode == 1 and re.search(said, done.stderr.strip().splitlines()[-1]), done.stderr[-2000:]
    assert "Traceback" not in done.stderr and not (tmp_path / "d.png").exists()


def test_the_dose_picture_is_drawn_from_a_dosed_run_and_refused_without_one(tmp_path):
    """Two doses of one method, six units each: a PNG; a folder of one model run at one strength: refused."""
    import pandas as pd

    columns = ["base", "extra", "test", "majority", "num_classes", "majority_all", "leak"]
    for model in ("toy@lr=0.0002", "toy@lr=0.002"):
        d = tmp_path / "r" / "m8" / "n10" / model / "a"
        d.mkdir(parents=True)
        rows = [[0.5, 0.5, 0.5 + (k % 3) / 10, 0.3, 2, 0.5, 0.9] for k in range(6)]
        pd.DataFrame(rows, columns=columns).to_csv(d / "accuracies.csv", index=False)
    script("dose_picture.py", str(tmp_path / "r"), "--out", str(tmp_path / "d.png"))
    assert (tmp_path / "d.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "r" / "m8" / "n10" / "toy@lr=0.002").rename(tmp_path / "r" / "m8" / "n10" / "toy")
    (tmp_path / "r" / "m8" / "n10" / "toy@lr=0.0002").rename(tmp_path / "r" / "m8" / "n10" / "toy2")
    done = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "dose_picture.py"),
            str(tmp_path / "r"),
            "--out",
            str(tmp_path / "e.png"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "holds no model run at several doses" in done.stderr


def test_table1_compare_sets_a_replications_cell_beside_the_studys_released_one(tmp_path, reference_dir):
    """Two of the study's own BERT tasks at m 50 / n 50, read as a replication's: each agrees with
    itself, and the study's side is read on the tasks in common and on all 25."""
    released = reference_dir / "accuracies" / "bert_gpt2" / "m50" / "n50" / "bert"
    for task in ("ag_news", "trec"):
        shutil.copytree(released / task, tmp_path / "m50" / "n50" / "minilm" / task)
    said = script("table1_compare.py", "--results", str(tmp_path), "--reference", str(reference_dir))
    assert "ours 200 units over 2 tasks; the study's BERT 2500 over 25" in said
    assert "bias, against the study's tasks in common: agree within 3 points: ours - study +0.00" in said
    assert said.count("read without a positive control: the replication planted no leak") == 2
    assert "**pooled, the study's 25** | -, 2500" in said
    missed = "cannot tell: the replication's planted leak is not seen, +0.00"
    for shift, read in ((0.0, missed), (0.2, "agree within 3 points")):
        for task in ("ag_news", "trec"):  # a planted leak, missed (as extra) or seen (20 points above it)
            table = tmp_path / "m50" / "n50" / "minilm" / task / "accuracies.csv"
            df = pd.read_csv(table)
            df.assign(leak=(df["extra"] + shift).clip(upper=1.0)).to_csv(table, index=False)
        said = script("table1_compare.py", "--results", str(tmp_path), "--reference", str(reference_dir))
        assert f"bias, against the study's tasks in common: {read}" in said
        assert "without a positive control" not in said


def test_the_input_probes_run_against_this_checkout_and_say_what_each_command_said(tiny_llama, data_dir):
    """Two probes through the script (each a subprocess of the code probed): one line each, no traceback,
    exit 1, nothing left behind, and what the command said."""
    out = script(
        "inputs_probe.py",
        "--tiny",
        str(tiny_llama),
        "--data-dir",
        str(data_dir),
        "--only",
        "statistic key {x}",
        "a folder with no task",
        "draw: m 0",
    )  # fmt: skip  (the third is one of input_cases.py's)
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 3
    for row in rows:
        _, rc, left, traceback, said = [c.strip() for c in row.strip("|").split(" | ")]
        assert (rc, left, traceback) == ("1", "0", "no") and said.startswith("tapt-bench: error:")
    assert "its key '{x}_gap' holds {x}" in rows[0] and "no task YAML in it" in rows[1]
    assert "cfg.yaml: key 'm' must be at least 1, got 0" in rows[2] and "/tmp/probe-" not in rows[2]


def test_the_probes_table_counts_a_taken_input_right_only_where_it_says_what_it_must(tmp_path):
    row = {"left": 0, "tb": False, "said": "tapt-bench: error: x"}
    before = [
        row | {"probe": "run: tasks empty", "rc": 0, "said": "log: a.log"},  # a bad input taken: silent
        row | {"probe": "run: tasks a string", "rc": 1},  # a good input refused: silent
        row | {"probe": "draw: m 0", "rc": 1, "tb": True},
    ]
    after = [
        row | {"probe": "run: tasks empty", "rc": 1},
        row | {"probe": "run: tasks a string", "rc": 0, "said": "log: a.log"},
        row | {"probe": "draw: m 0", "rc": 1},
    ]
    for name, rows in (("before", before), ("after", after)):
        (tmp_path / f"{name}.json").write_text(json.dumps(rows))
    out = script("inputs_probe.py", "--table", str(tmp_path / "before.json"), str(tmp_path / "after.json"))
    assert "| run: tasks empty | 0, 0, silent | 1, 0, refused |" in out
    assert "| run: tasks a string | 1, 0, silent | 0, 0, taken |" in out
    assert "before: silent 2, traceback 1" in out and "after: refused 2, taken 1" in out


def test_the_ttrl_premise_table_is_recomputed_from_the_answers_it_recorded(tiny_llama, tmp_path):
    """The premise pilot writes every answer it read; its table comes back from them alone, the same."""
    records = tmp_path / "answers.json"
    measured = script("ttrl_premise.py", "--smoke", "--base", str(tiny_llama), "--records", str(records))
    again = script("ttrl_premise.py", "--from-records", str(records))
    assert "| arithmetic | N 4, T 1, budget 16 |" in measured and again == measured
    found = json.loads(records.read_text())
    assert set(found["tasks"]["arithmetic"]["sampled"]) == {"16/1"} and found["samples"] == [2, 4]
