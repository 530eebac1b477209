"""Nothing computed is lost, round five: a unit is finished only when its record and its table are both
there; the contamination commands' --out never replaces a file they did not write; merge respects a
live run's lock."""

import json
import os
import shutil

import pandas as pd
import pytest
from helpers import TINY_GRID_DIR, tiny_grid_config

import harness
from harness.cli.main import main


def test_a_unit_whose_table_is_lost_is_computed_again_not_counted_finished(
    tmp_path, tiny_grid, tiny_llama, data_dir
):
    out = tmp_path / "full"
    shutil.copytree(tiny_grid, out)
    tdir = out / TINY_GRID_DIR
    (tdir / "units" / "1.parquet").unlink()  # its record kept: half a unit
    with pytest.raises(SystemExit, match=r"2 finished unit\(s\) in units/ and 3 in accuracies.csv"):
        main(["summarize", str(out)])  # the tables are stale: said, and the advice below mends it
    harness.run(tiny_grid_config(tmp_path, tiny_llama, data_dir, out))
    log = sorted((tdir.parent / "logs").glob("run-*.log"))[-1].read_text()
    assert "1 units to run of 3" in log.replace("unit(s)", "units")
    assert (tdir / "units" / "1.parquet").is_file()
    again = pd.read_csv(tdir / "accuracies.csv")
    pd.testing.assert_frame_equal(again, pd.read_csv(tiny_grid / TINY_GRID_DIR / "accuracies.csv"))
    main(["summarize", str(out)])  # reads again


def test_the_exchangeability_out_never_replaces_a_file_the_tool_did_not_write(tmp_path, tiny_llama, data_dir):
    mine = tmp_path / "study_log.json"
    mine.write_text(json.dumps({"pval": 0.5, "note": "a copy of the study's reference log"}))
    argv = ["contamination", "exchangeability", "--task", "ag_news", "--split", "test", "--n", "8"]
    argv += ["--base", str(tiny_llama), "--data-dir", str(data_dir), "--out", str(mine)]
    with pytest.raises(SystemExit, match="study_log.json exists and is not a result tapt-bench wrote"):
        main(argv)
    assert json.loads(mine.read_text())["note"] == "a copy of the study's reference log"
    with pytest.raises(SystemExit, match="is a folder: name a file"):
        main([*argv[:-1], str(tmp_path)])


def test_merge_into_a_folder_a_live_run_holds_is_refused_naming_its_pid(tmp_path, tiny_grid):
    import socket
    import subprocess
    import sys

    from harness import results

    out = tmp_path / "out"
    mdir = out / TINY_GRID_DIR.rsplit("/", 1)[0]
    mdir.mkdir(parents=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        path = results.lock_path(mdir, (0, 1))  # a live run's lock, as it writes it
        path.write_text(json.dumps({"pid": sleeper.pid, "host": socket.gethostname(), "started": "now"}))
        with pytest.raises(SystemExit, match=rf"merge: a run holds .*\(PID {sleeper.pid} on"):
            main(["merge", str(tiny_grid), "--out", str(out)])
        assert not list(mdir.glob("*/units/*.json"))  # nothing merged beside the live run
    finally:
        sleeper.kill()
        sleeper.wait()
    main(["merge", str(tiny_grid), "--out", str(out)])  # its run gone: the stale lock no longer blocks
    assert len(list(mdir.glob("*/units/*.json"))) == 3


@pytest.mark.parametrize("settings", [{"free_answer": "last"}, {"answers": "free"}])
def test_test_time_rl_settings_a_generative_task_never_reads_are_refused(tmp_path, tiny_llama, settings):
    from helpers import write_grid_config

    cfg = {"base": str(tiny_llama), "tasks": ["arithmetic"], "m": 4, "n": 8, "subsamples": 1}
    cfg |= {"quantize": "none", "method": "test-time-rl", "method_settings": {"test-time-rl": settings}}
    path = write_grid_config(tmp_path, tmp_path / "out", cfg)
    key = next(iter(settings))
    with pytest.raises(
        SystemExit, match=rf"test-time-rl, task arithmetic: {key}: .* generative .*: drop them"
    ):
        main(["run", "--config", str(path)])
    assert not (tmp_path / "out").exists()


@pytest.fixture
def inputs(tmp_path, tiny_bert, data_dir):
    """A classifier grid over copies of the data, a task YAML and the base, all in tmp_path: one unit run."""
    from harness.tasks.spec import TASKS_DIR

    data = tmp_path / "data"
    shutil.copytree(data_dir / "trec", data / "my_trec")
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    text = (TASKS_DIR / "tapt_trec.yaml").read_text().replace("tapt_trec", "tapt_my_trec")
    text = text.replace("slug: trec", "slug: my_trec").replace(
        "include: _template_yaml", f"include: {TASKS_DIR / '_template_yaml'}"
    )
    (tasks / "tapt_my_trec.yaml").write_text(text)
    base = tmp_path / "base"
    shutil.copytree(tiny_bert, base)
    cfg = {
        "base": str(base), "model_tag": "tiny", "flow": "classifier", "tasks": ["my_trec"], "m": 12, "n": 8,
        "method_settings": {"raw-text": {"pretrain_epochs": 1, "pretrain_batch_size": 4}}, "clf_epochs": 1,
        "eval_batch_size": 8, "data_dir": str(data), "include_path": [str(tasks)],
    }  # fmt: skip

    def run_with(subsamples: int):
        from helpers import write_grid_config

        path = write_grid_config(tmp_path, tmp_path / "out", cfg | {"subsamples": subsamples})
        main(["run", "--config", str(path), "--no-summary"])

    run_with(1)
    unit = json.loads(next((tmp_path / "out").rglob("units/0.json")).read_text())
    assert set(unit["inputs"]) == {"rows", "pool", "task", "base"} and all(unit["inputs"].values())
    return {
        "run": run_with,
        "data": data / "my_trec" / "data.parquet",
        "task": tasks / "tapt_my_trec.yaml",
        "base": base,
    }


def test_a_replaced_data_file_between_two_runs_into_one_out_is_refused(inputs):
    frame = pd.read_parquet(inputs["data"])
    frame.assign(text=frame["text"] + " (edited)").to_parquet(inputs["data"])
    with pytest.raises(
        SystemExit, match=r"my_trec subsample 0: the rows its draw gives \(the task's data file"
    ):
        inputs["run"](2)


def test_an_edited_task_yaml_between_two_runs_into_one_out_is_refused(inputs):
    text = inputs["task"].read_text()
    inputs["task"].write_text(text.replace('instruction: "', 'instruction: "Read closely. '))
    assert inputs["task"].read_text() != text
    with pytest.raises(SystemExit, match=r"its task's definition \(the task YAML was edited\)"):
        inputs["run"](2)


def test_other_weights_under_the_same_base_between_two_runs_into_one_out_are_refused(inputs):
    import torch
    from transformers import AutoModelForMaskedLM

    model = AutoModelForMaskedLM.from_pretrained(inputs["base"])
    with torch.no_grad():
        next(model.parameters()).add_(0.01)
    model.save_pretrained(inputs["base"])
    with pytest.raises(SystemExit, match=r"the base's weight files \(other weights under the same name\)"):
        inputs["run"](2)


def test_unchanged_inputs_resume_and_add_the_next_unit(inputs, tmp_path):
    inputs["run"](2)
    assert len(list((tmp_path / "out").rglob("units/*.json"))) == 2


def test_overwrite_in_one_shard_deletes_only_that_shards_units_and_says_which(
    tmp_path, tiny_bert, data_dir, capsys
):
    from helpers import write_grid_config

    cfg = {
        "base": str(tiny_bert), "model_tag": "tiny", "flow": "classifier", "tasks": ["trec"], "m": 12, "n": 8,
        "subsamples": 2, "method_settings": {"raw-text": {"pretrain_epochs": 1, "pretrain_batch_size": 4}},
        "eval_batch_size": 8, "data_dir": str(data_dir), "clf_epochs": 1,
    }  # fmt: skip
    first = write_grid_config(tmp_path, tmp_path / "out", cfg)
    main(["run", "--config", str(first), "--no-summary"])
    units = tmp_path / "out" / "m12" / "n8" / "tiny" / "trec" / "units"
    old = {k: json.loads((units / f"{k}.json").read_text())["settings"]["clf_epochs"] for k in (0, 1)}
    changed = write_grid_config(tmp_path, tmp_path / "out", cfg | {"clf_epochs": 2})
    capsys.readouterr()
    main(["run", "--config", str(changed), "--shard", "0/2", "--overwrite", "--no-summary"])
    said = capsys.readouterr().err
    assert "--overwrite: deleted 1 unit(s) of shard 0/2 made with other settings: trec 0" in said
    assert "kept 1 unit(s) of the other shards" in said
    now = {k: json.loads((units / f"{k}.json").read_text())["settings"]["clf_epochs"] for k in (0, 1)}
    assert old == {0: 1.0, 1: 1.0} and now == {0: 2.0, 1: 1.0}  # shard 1's unit kept for its own rerun
    with pytest.raises(SystemExit, match=r"2 finished unit\(s\) in units/ and 1 in accuracies.csv"):  # stale
        main(["summarize", str(tmp_path / "out")])
    main(["run", "--config", str(changed), "--shard", "1/2", "--overwrite", "--no-summary"])
    main(["summarize", str(tmp_path / "out")])  # both shards on the new settings: it reads


def test_an_include_loop_is_one_line_and_leaves_the_other_tasks_readable(tmp_path, data_dir, capsys):
    (tmp_path / "a.yaml").write_text("include: b.yaml\ntask: tapt_a\n")
    (tmp_path / "b.yaml").write_text("include: a.yaml\n")
    with pytest.raises(SystemExit):
        main(["tasks", "validate", str(tmp_path)])
    assert "its includes come back to a file they came from" in capsys.readouterr().out
    main(["tasks", "show", "--task", "ag_news", "--include-path", str(tmp_path), "--data-dir", str(data_dir)])
    assert "<- target" in capsys.readouterr().out


def test_a_write_that_fails_is_one_line_keeping_what_was_written(tmp_path, monkeypatch):
    from harness import results

    target = tmp_path / "out" / "table.csv"
    results.atomic_write(target, b"before")

    def full(self, data):  # a full disk, as the kernel reports it
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(type(target), "write_bytes", full)
    with pytest.raises(
        results.paths.UserError,
        match=r"cannot write .*table.csv: the disk is full \(No space left on device\)",
    ):
        results.atomic_write(target, b"after")
    monkeypatch.undo()
    assert target.read_bytes() == b"before" and not list(target.parent.glob(".*.tmp"))


def test_a_users_note_in_units_is_not_read_as_a_damaged_unit(tmp_path, tiny_grid):
    out = tmp_path / "full"
    shutil.copytree(tiny_grid, out)
    (out / TINY_GRID_DIR / "units" / "my_notes.json").write_text('{"seen": "fine"}')
    main(["summarize", str(out)])  # reads as before


def test_a_peft_adapter_given_as_a_checkpoint_is_named_as_an_adapter(tmp_path, data_dir):
    (tmp_path / "adapter_config.json").write_text('{"peft_type": "LORA"}')
    argv = ["contamination", "exposure", "--task", "ag_news", "--checkpoint", str(tmp_path)]
    with pytest.raises(SystemExit, match="is a PEFT adapter .*: pass it as --peft, with its base as --base"):
        main([*argv, "--data-dir", str(data_dir), "--m", "4", "--n", "8"])


def test_weights_cut_short_are_named_before_anything_loads_or_is_written(tmp_path, tiny_llama, data_dir):
    import torch
    from safetensors.torch import save_file

    base = tmp_path / "base"
    shutil.copytree(tiny_llama, base)
    whole = (base / "model.safetensors").stat().st_size
    with open(base / "model.safetensors", "r+b") as f:
        f.truncate(whole // 2)  # a copy that stopped half way
    argv = ["--task", "ag_news", "--data-dir", str(data_dir), "--m", "4", "--n", "8"]
    cut = r"model.safetensors is not a whole weights file \(.*\): it was cut short or partly copied"
    with pytest.raises(SystemExit, match=f"--base {base}: {cut}"):  # was SafetensorError's traceback
        main(["train", *argv, "--split", "test", "--base", str(base), "--out", str(tmp_path / "ad")])
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    save_file({"w": torch.zeros(64)}, adapter / "adapter_model.safetensors")
    (adapter / "adapter_config.json").write_text(
        json.dumps({"peft_type": "LORA", "base_model_name_or_path": str(tiny_llama)})
    )
    with open(adapter / "adapter_model.safetensors", "r+b") as f:
        f.truncate(100)
    out = tmp_path / "exposure.json"
    with pytest.raises(SystemExit, match=f"--peft {adapter}: adapter_{cut}"):
        main(
            ["contamination", "exposure", *argv, "--base", str(tiny_llama), "--peft", str(adapter)]
            + ["--out", str(out)]
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adapter", "base"]  # nothing written


def test_tables_that_disagree_with_no_units_beside_them_say_a_rerun_computes_every_unit(tmp_path, tiny_grid):
    out = tmp_path / "copied"
    shutil.copytree(tiny_grid, out)
    tdir = out / TINY_GRID_DIR
    shutil.rmtree(tdir / "units")  # tables copied without their units
    acc = pd.read_csv(tdir / "accuracies.csv")
    acc.iloc[:-1].to_csv(tdir / "accuracies.csv", index=False)
    with pytest.raises(SystemExit) as stop:
        main(["summarize", str(out)])
    said = str(stop.value)
    assert "the two tables disagree; no unit records lie beside them (units/)" in said
    assert "compute every unit again" in said and "rebuild both from the finished units" not in said


def test_a_reader_that_stops_early_ends_the_command_quietly(monkeypatch, capfd):
    """`tapt-bench summarize ... | head -2`: the closed pipe is no error (BrokenPipeError is an OSError,
    and the disk-full handler raised it again as a traceback)."""
    import os
    import sys
    from pathlib import Path

    from harness.cli.main import main

    read, write = os.pipe()
    os.close(read)
    saved = os.dup(1)
    os.dup2(write, 1)
    out = os.fdopen(os.dup(1), "w", buffering=1)
    monkeypatch.setattr(sys, "stdout", out)
    try:
        main(["summarize", str(Path(__file__).resolve().parents[1] / "studies" / "methods_study")])
    finally:
        os.dup2(saved, 1)
        os.close(write)
    assert "Traceback" not in capfd.readouterr().err


def test_a_write_never_replaces_a_device_or_a_pipe(tmp_path):
    """The atomic write renames over its target: onto /dev/full it left a regular file there. A target
    that exists and is not a regular file is refused, and stays what it was."""
    import os
    import stat

    from harness.core.plumbing.errors import UserError
    from harness.results.paths import atomic_write, file_problem

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    targets = [fifo]
    if os.geteuid() == 0:  # a character device, as /dev/full is (1, 7); only root may make one
        os.mknod(tmp_path / "full", 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        targets.append(tmp_path / "full")
    for target in targets:
        kind = stat.S_IFMT(target.stat().st_mode)
        with pytest.raises(UserError, match="exists and is not a regular file"):
            atomic_write(target, b"{}")
        assert "not a regular file" in file_problem(target)
        assert stat.S_IFMT(target.stat().st_mode) == kind


@pytest.mark.parametrize(
    "log, said",
    [
        (
            {"canonical_logprobs": [1, 1, 1], "shuffled_logprobs": [[0], [0], [0]]},
            "with no spread the t-test",
        ),
        ({"canonical_logprobs": [], "shuffled_logprobs": []}, "canonical_logprobs .* holds no numbers"),
        (
            {"canonical_logprobs": [1, 2], "shuffled_logprobs": [[0], []]},
            "shuffled_logprobs .* an empty list",
        ),
        (
            {"canonical_logprobs": [1, 2], "shuffled_logprobs": [[1, 2], [1]]},
            "shuffled_logprobs holds lists of 1 and 2 numbers",
        ),
        (
            {"canonical_logprobs": [1, 2, 3], "shuffled_logprobs": [[1], [1]]},
            "shuffled_logprobs holds 2 lists for 3 shards",
        ),
    ],
)
def test_a_pvalue_log_with_no_spread_or_no_numbers_is_one_line(tmp_path, capsys, log, said):
    """`contamination pvalue` printed `pval 0` or `pval nan` for shards with no spread, and `a non-number`
    for empty lists."""
    import json

    from harness.cli.main import main

    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))
    with pytest.raises(SystemExit, match=said):
        main(["contamination", "pvalue", str(path)])
    assert "pval" not in capsys.readouterr().out


def test_an_hdi_mass_of_one_or_more_is_refused_before_any_sampling():
    from harness.core.plumbing.errors import SettingsError
    from harness.stats.bayes.analysis import AnalysisSettings

    with pytest.raises(SettingsError, match="hdi_prob must be below 1.0, got 1.5"):
        AnalysisSettings(hdi_prob=1.5)


def test_a_cut_table_is_one_line_naming_it_and_the_rebuild(tmp_path, tiny_grid):
    """A probabilities.parquet cut to 500 bytes raised pyarrow's ArrowInvalid in summarize, report and
    analyze."""
    import shutil

    from harness.cli.main import main

    shutil.copytree(tiny_grid, tmp_path / "run")
    table = next((tmp_path / "run").rglob("probabilities.parquet"))
    table.write_bytes(table.read_bytes()[:500])
    with pytest.raises(
        SystemExit, match=r"probabilities.parquet: not a readable table \(ArrowInvalid\); delete"
    ):
        main(["summarize", str(tmp_path / "run")])


DATA = ("--data-dir", "{data}")
DEVICE_COMMANDS = {  # every command that writes where --out (or its like) says, with the device there
    "run": ["run", "--config", "demo", "--out", "{dev}", *DATA],
    "merge": ["merge", "{src}", "--out", "{dev}"],
    "report": ["report", "{src}", "--out", "{dev}"],
    "analyze": ["analyze", "{src}", "--out", "{dev}"],
    "exposure": ["contamination", "exposure", "--task", "ag_news", "--n", "8", "--out", "{dev}", *DATA],
    "exchangeability": ["contamination", "exchangeability", "--task", "ag_news", "--out", "{dev}"],
    "calibrate": ["contamination", "calibrate", "--config", "demo", "--out", "{dev}", *DATA],
    "train": ["train", "--task", "ag_news", "--n", "8", "--split", "test", "--out", "{dev}", *DATA],
    "pilot": ["pilot", "--config", "demo", "--plan", "{dev}", "--plan-seed", "9999", *DATA],
    "tasks new": ["tasks", "new", "my_task", "--out", "{dev}"],
    "analyze --plots": ["analyze", "{src}", "--plots", "{dev}"],
    "pilot --plan-out": [
        "pilot", "--config", "demo", "--plan", "p.yaml", "--plan-seed", "9999", "--plan-out", "{dev}", *DATA
    ],
    "simulate pca --plot": ["simulate", "pca", "--plot", "{dev}"],
    "analyze meta --out": ["analyze", "meta", "{src}", "--m", "4", "--n", "6", "--out", "{dev}"],
}  # fmt: skip


def test_a_plot_is_never_written_over_a_file_tapt_bench_did_not_make(tmp_path, capsys):
    """`simulate pca --plot` saved over any file (a user's picture, notes) and into a FIFO or device; now
    a file that is not one of its plots is refused before the simulation, and a plot of its own is
    replaced (each carries the mark)."""
    from harness.cli.main import main

    argv = [
        "simulate",
        "pca",
        "--ranks",
        "2",
        "--subsamples",
        "2",
        "--features",
        "8",
        "--m",
        "20",
        "--n",
        "20",
    ]
    mine = tmp_path / "mine.png"
    mine.write_text("my notes")
    with pytest.raises(SystemExit, match="mine.png exists and is not a plot tapt-bench made"):
        main([*argv, "--plot", str(mine)])
    assert mine.read_text() == "my notes" and "bias" not in capsys.readouterr().out
    ours = tmp_path / "ours.png"
    main([*argv, "--plot", str(ours)])
    first = ours.read_bytes()
    main([*argv, "--plot", str(ours)])  # its own plot: written again, whole
    assert first[:8] == b"\x89PNG\r\n\x1a\n" and ours.read_bytes() == first


@pytest.mark.skipif(getattr(os, "geteuid", lambda: 1)() != 0, reason="only root may make a device (mknod)")
@pytest.mark.parametrize("command", sorted(DEVICE_COMMANDS))
def test_every_command_refuses_a_device_as_its_output_and_leaves_it_a_device(
    command, tmp_path, tiny_grid, data_dir
):
    """A character device (as /dev/full, made here) named as a command's output: refused in one line, the
    device left a device, where an atomic write once renamed a file over it."""
    import stat

    from harness.cli.main import main

    dev = tmp_path / "full"
    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    argv = [a.format(dev=dev, data=data_dir, src=tiny_grid) for a in DEVICE_COMMANDS[command]]
    with pytest.raises(SystemExit) as refused:
        main(argv)
    said = str(refused.value.code)
    assert str(dev) in said and ("not a regular file" in said or "not a folder" in said), said
    assert stat.S_ISCHR(dev.stat().st_mode)


def test_a_flow_file_beside_the_config_but_not_where_the_run_starts_is_named_with_both_fixes(
    tmp_path, tiny_llama, data_dir, monkeypatch
):
    """`flow: f.py:FLOW` is found from the folder the command starts from (as `out` is), where data_dir is
    found from the config's: run from elsewhere, the refusal says where the file is and both fixes."""
    from harness.core.plumbing.errors import SettingsError
    from harness.grid.configuration.config import load_config

    (tmp_path / "cfgs").mkdir()
    (tmp_path / "cfgs" / "f.py").write_text("FLOW = None\n")
    path = tiny_grid_config(tmp_path / "cfgs", tiny_llama, data_dir, tmp_path / "out", flow="f.py:FLOW")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    with pytest.raises(SettingsError) as refused:
        load_config(path)
    said = str(refused.value)
    assert "key 'flow'" in said and f"holds one ({tmp_path / 'cfgs' / 'f.py'})" in said
    assert f"start from {tmp_path / 'cfgs'}" in said and f"{tmp_path / 'cfgs' / 'f.py'}:FLOW" in said


@pytest.mark.parametrize(
    "field, value, said",
    [
        ("chance", 0.9, "it was edited after it was written (its record_hash no longer matches)"),
        ("train_majority", 0.9, "it was edited after it was written (its record_hash no longer matches)"),
        ("subsample", 7, "a record says subsample 7, and no units/7.json holds it"),
    ],
)
def test_a_unit_record_edited_in_any_field_is_named_by_the_summary(tmp_path, tiny_grid, field, value, said):
    """Each unit record carries the hash of all else in it, taken as it is written: a field no table
    repeats (the chance level, the exposure test) edited by hand is named; the run as written names none."""
    from harness.cli.main import main

    run = tmp_path / "run"
    shutil.copytree(tiny_grid, run)
    assert "disagree" not in " ".join(main_said(main, ["summarize", str(run)]).split())
    unit = run / TINY_GRID_DIR / "units" / "1.json"
    record = json.loads(unit.read_text())
    assert field in record and record["record_hash"]
    unit.write_text(json.dumps({**record, field: value}))
    text = " ".join(main_said(main, ["summarize", str(run)]).split())
    assert "unit file(s) disagree with their hash or their tables" in text and said in text


def main_said(main, argv) -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(argv)
    return out.getvalue()


@pytest.mark.parametrize(
    "yaml, data, said",
    [
        (
            "output_type: generate_until\ndoc_to_text: '{{q}}'\n",
            '{"q": "1 + 1?", "a": "2"}\n' * 30,
            "a generate_until task without doc_to_target: the design scores each answer against the gold one",
        ),
        (
            "output_type: generate_until\ndoc_to_text: '{{q}}'\ndoc_to_target: '{{a}}'\n",
            "",
            "its data file d.jsonl is empty: it holds no documents",
        ),
    ],
)
def test_a_task_lm_eval_cannot_build_is_named_by_its_cause(tmp_path, monkeypatch, capsys, yaml, data, said):
    """lm-eval's own errors said `TypeError (no message, raised at task.py:1280)` for a generative task
    with no doc_to_target, and `StopIteration` for an empty data file: each is now its cause and fix."""
    from harness.cli.main import main

    monkeypatch.chdir(tmp_path)  # a data file named in a YAML is found from here, as lm-eval finds it
    (tmp_path / "d.jsonl").write_text(data)
    (tmp_path / "t").mkdir()
    head = "task: my_t\ndataset_path: json\ndataset_kwargs:\n  data_files: d.jsonl\ntest_split: train\n"
    (tmp_path / "t" / "t.yaml").write_text(head + yaml)
    with pytest.raises(SystemExit):
        main(["tasks", "validate", "t", "--m", "4", "--n", "8"])
    assert said in " ".join(capsys.readouterr().out.split())


def test_a_record_our_tools_rewrite_is_sealed_again_and_an_edit_by_hand_is_not(tmp_path, tiny_grid):
    """codec_retest rewrites unit records after their run: through results.rewrite_unit they stay whole;
    the same change written by hand reads as damage."""
    from harness import results

    shutil.copytree(tiny_grid, tmp_path / "run")
    tdir = tmp_path / "run" / TINY_GRID_DIR
    unit = tdir / "units" / "1.json"
    record = {**json.loads(unit.read_text()), "note": "retested"}
    results.rewrite_unit(unit, record)
    assert results.damaged(tdir) == [] and json.loads(unit.read_text())["note"] == "retested"
    unit.write_text(json.dumps({**record, "note": "by hand"}))
    assert "its record_hash no longer matches" in " ".join(results.damaged(tdir))


@pytest.mark.parametrize("action", [["fit"], ["meta", "--m", "4", "--n", "6"]])
def test_analyze_out_over_a_users_file_is_refused_before_it_samples(tmp_path, tiny_grid, action):
    """`analyze --out FILE` replaced any file (a user's YAML notes became JSON); `analyze meta` took --out
    and wrote nothing. Both refuse a file that is not a result of ours, before any sampling, and take one
    that is."""
    from harness.cli.main import main

    notes = tmp_path / "notes.yaml"
    notes.write_text("my: notes\n")
    with pytest.raises(SystemExit, match="notes.yaml exists and is not a result tapt-bench wrote"):
        main(["analyze", *action, str(tiny_grid), "--out", str(notes)])
    assert notes.read_text() == "my: notes\n"
    ours = tmp_path / "fits.json"
    ours.write_text(json.dumps({"written_by": "tapt-bench", "results": "x", "fits": []}))
    with pytest.raises(SystemExit) as later:  # past the check: the one-task grid is the model's own refusal
        main(["analyze", *action, str(tiny_grid), "--out", str(ours)])
    assert "needs at least two" in str(later.value.code)


def test_analyze_plots_into_a_folder_holding_a_users_file_of_a_plots_name_is_refused(tmp_path, tiny_grid):
    from harness.cli.main import main

    plots = tmp_path / "plots"
    plots.mkdir()
    (plots / "eq11_average_difference.png").write_text("my picture")
    with pytest.raises(
        SystemExit, match="eq11_average_difference.png exists and is not a plot tapt-bench made"
    ):
        main(["analyze", str(tiny_grid), "--plots", str(plots)])
    assert (plots / "eq11_average_difference.png").read_text() == "my picture"
