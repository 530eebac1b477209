"""Adaptation methods: the registry (built-ins, a user's file, an installed entry point), what a method
receives (no gold labels outside the leak), TLM's selection, and a broken method's error."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from helpers import grid_tables, tiny_grid_config
from safetensors.torch import load_file

from harness.cli.main import main
from harness.core.plumbing.errors import SettingsError
from harness.grid.configuration import plan, resolve
from harness.grid.configuration.config import load_config
from harness.grid.configuration.run_checks import load_run
from harness.grid.unit import flow, unit_record
from harness.grid.unit.unit_plan import UnitKey
from tapt import methods
from tapt.methods.tlm import weights

BROKEN = """
from tapt.methods import Method
from tapt.methods.prompt_tapt import METHOD as PROMPT

def boom(x):
    raise RuntimeError("boom")

RAISES = Method("raises", ("zero_shot",), PROMPT.settings, boom)
WRONG = Method("wrong", ("zero_shot",), PROMPT.settings, lambda x: x.model)
NOT_A_METHOD = 3
"""


def test_methods_list_prints_the_four_built_ins_with_their_flows(capsys):
    main(["methods", "list"])
    shown = capsys.readouterr().out
    for name, served in [
        ("prompt-tapt", "zero_shot"),
        ("raw-text", "classifier"),
        ("test-time-learning", "zero_shot"),
        ("self-training", "zero_shot"),
    ]:
        assert any(line.split()[:2] == [name, served] for line in shown.splitlines()), shown


def test_tlm_selects_the_inputs_above_its_threshold_with_its_weight():
    w = weights(torch.tensor([2.0, 3.0, 3.5, 5.0]), threshold=3.0, lamb=0.1)
    assert w[:2].tolist() == [0.0, 0.0]  # at or below the threshold: skipped
    assert w[2:].tolist() == pytest.approx([0.1 * 2.718281828**0.5, 0.1 * 2.718281828**2])


def test_a_condition_other_than_the_leak_gets_no_label_column():
    docs = {s: pd_frame() for s in ("extra", "test")}
    assert "label" not in unit_record.split_docs(docs, "extra") and "label" not in unit_record.split_docs(
        docs, "test"
    )
    assert "label" in unit_record.split_docs(docs, "leak")


def pd_frame():
    import pandas as pd

    return pd.DataFrame({"text": ["a"], "prompt": ["a"], "choices": [["x", "y"]], "label": [1], "row": [0]})


def adapter_weights(folder):
    return load_file(str(next(folder.rglob("adapter_model.safetensors"))))


@pytest.mark.slow
def test_self_training_never_reads_the_gold_labels_outside_the_leak(
    tmp_path, tiny_llama, data_dir, monkeypatch
):
    """The same unit twice, the second with every split's gold labels shuffled after the draw: the
    extra and test adapters are the same weights; the leak's (trained on gold labels) differ."""
    import numpy as np

    cfg = load_config(
        tiny_grid_config(
            tmp_path, tiny_llama, data_dir, tmp_path / "out", method="self-training", exposure=False
        )
    )
    from harness.grid.unit import unit_plan

    draw = unit_plan.subsample_docs
    kept = {}
    for shuffled in (False, True):

        def subsample_docs(*args, shuffled=shuffled):
            docs = draw(*args)
            if shuffled:
                for d in docs.values():
                    d["label"] = np.random.default_rng(1).permutation(d["label"].to_numpy())
            return docs

        monkeypatch.setattr(unit_plan, "subsample_docs", subsample_docs)
        unit = flow.compute(
            plan.run_plan(cfg.replace(out=str(tmp_path / f"out{shuffled}"))).unit(UnitKey("ag_news", 0)),
            keep_adapters=True,
        )
        # the pseudo-labels on test are the base's zero-shot answers: their accuracy is the base's on test
        # (within one document: a near-tie of a random tiny model may break the other way in one pass)
        made_up = unit.record["training"]["test"]
        n = made_up["voted"]
        assert n == len(unit.probs.query("condition == 'test'"))
        assert abs(made_up["label_accuracy"] - unit.accs["base"]) <= 1 / n + 1e-9
        assert "label_accuracy" not in unit.record["training"]["leak"]  # the leak trains on the gold ones
        kept[shuffled] = {
            c: adapter_weights(next((tmp_path / f"out{shuffled}").rglob(f"0_{c}")))
            for c in ("extra", "test", "leak")
        }
    record = json.loads(next((tmp_path / "outFalse").rglob("0_test/tapt.json")).read_text())
    assert (record["prompt_format"], record["accuracy"]) == ("plain", "acc")  # how lm-eval reads it
    for cond in ("extra", "test"):
        assert all(torch.equal(kept[False][cond][k], kept[True][cond][k]) for k in kept[False][cond])
    assert not all(torch.equal(kept[False]["leak"][k], kept[True]["leak"][k]) for k in kept[False]["leak"])


@pytest.mark.parametrize(
    "way",
    [
        "file",
        pytest.param("module:attr", marks=pytest.mark.slow),
        pytest.param("entry point", marks=pytest.mark.slow),
    ],
)
def test_the_readme_users_method_runs_through_run_summarize_and_report(
    way, tmp_path, tiny_llama, data_dir, capsys, monkeypatch
):
    """The README's example method (examples/norm_tuning.py), named by its path, as module:attr, and as
    the entry point of a tiny installed package: its own results folder (<model>+<method>), its
    settings in every unit's record, read by summarize and report."""
    examples = Path(__file__).resolve().parents[1] / "examples"
    name = f"{examples / 'norm_tuning.py'}:METHOD"
    if way != "file":
        monkeypatch.syspath_prepend(str(examples))
        name = "norm_tuning:METHOD"
    if way == "entry point":  # an installed distribution: its metadata on sys.path, as pip leaves it
        dist = tmp_path / "site" / "norm_tuning_plugin-0.1.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: norm-tuning-plugin\nVersion: 0.1\n")
        (dist / "entry_points.txt").write_text(f"[tapt_bench.methods]\nnorm-tuning = {name}\n")
        monkeypatch.syspath_prepend(str(tmp_path / "site"))
        name = "norm-tuning"
    out = tmp_path / "out"
    config = tiny_grid_config(
        tmp_path,
        tiny_llama,
        data_dir,
        out,
        subsamples=2,
        method=name,
        method_settings={"norm-tuning": {"steps": 2}},
    )
    main(["run", "--config", str(config)])
    acc, _ = grid_tables(out, "m4/n6/tiny+norm-tuning/ag_news")
    assert len(acc) == 2 and {"base", "extra", "test", "leak"} <= set(acc.columns)
    record = json.loads((out / "m4/n6/tiny+norm-tuning/ag_news/units/0.json").read_text())
    assert (
        record["settings"]["method"] == "norm-tuning" and record["settings"]["method_settings"]["steps"] == 2
    )
    assert "epochs" not in record["settings"]  # prompt TAPT's keys are not this method's
    capsys.readouterr()
    main(["summarize", str(out)])
    printed = capsys.readouterr().out
    assert "tiny+norm-tuning" in printed and "last loss" in printed  # the method's own diagnostic
    main(["report", str(out), "--out", str(tmp_path / "report.html")])
    page = (tmp_path / "report.html").read_text()
    assert "tiny+norm-tuning" in page and "last loss" in page


def test_an_installed_entry_point_is_a_method(tmp_path, monkeypatch, capsys):
    package = tmp_path / "site"
    (package / "my_methods").mkdir(parents=True)
    (package / "my_methods" / "__init__.py").write_text(
        "from tapt.methods import Method\nfrom tapt.methods.prompt_tapt import METHOD as P\n"
        "MINE = Method('mine', ('zero_shot',), P.settings, P.adapt, 'prompt TAPT, installed')\n"
    )
    dist = package / "my_methods-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-methods\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[tapt_bench.methods]\nmine = my_methods:MINE\n")
    monkeypatch.syspath_prepend(str(package))  # the entry points are read at each new name's lookup
    main(["methods", "list"])
    assert any(
        line.split()[:3] == ["mine", "zero_shot", "entry"] for line in capsys.readouterr().out.splitlines()
    )
    assert methods.find("mine").adapt is methods.find("prompt-tapt").adapt


def test_a_file_method_is_loaded_and_checked_once_and_a_relative_name_is_the_file_of_its_folder(
    tmp_path, monkeypatch, capsys
):
    """A grid finds its method many times a unit: the same name gives the same checked method (its file
    run once), and `my.py:M` names the file of the folder it is named from."""
    for folder, description in (("a", "first"), ("b", "second")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "my.py").write_text(
            "from tapt.methods import Method\nfrom tapt.methods.prompt_tapt import METHOD as P\n"
            "print('loading my.py')\n"
            f"M = Method('mine-{folder}', ('zero_shot',), P.settings, P.adapt, '{description}')\n"
        )
    monkeypatch.chdir(tmp_path / "a")
    first = methods.find("my.py:M")
    assert methods.find("my.py:M") is first and methods.find(f"{tmp_path / 'a' / 'my.py'}:M") is first
    monkeypatch.chdir(tmp_path / "b")
    assert methods.find("my.py:M").about == "second" and first.about == "first"
    assert capsys.readouterr().out.count("loading my.py") == 2  # each file ran once


@pytest.mark.parametrize(
    "method, message",
    [
        ("nope", "key 'method' no method 'nope': the methods are prompt-tapt, .*path/to/my_method.py:METHOD"),
        ("{file}:NOT_A_METHOD", "key 'method' .*NOT_A_METHOD' is a int, not a tapt.methods.contract.Method"),
        ("{file}:MISSING", "key 'method' .*cannot be imported \\(AttributeError"),
        (
            "raw-text",
            "key 'method' raw-text serves the flow\\(s\\) \\['classifier'\\], and flow is 'zero_shot'",
        ),
    ],
)
def test_an_unknown_or_unusable_method_is_refused_before_anything_is_written(
    method, message, tmp_path, tiny_llama, data_dir
):
    (tmp_path / "broken.py").write_text(BROKEN)
    out = tmp_path / "out"
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, out, method=method.format(file=tmp_path / "broken.py")
    )
    with pytest.raises(SettingsError, match=message):
        load_run(config)
    with pytest.raises(SystemExit):
        main(["run", "--config", str(config)])
    assert not out.exists()


@pytest.mark.parametrize(
    "attr, message",
    [
        ("RAISES", "method raises \\(.*broken.py:RAISES\\) failed: RuntimeError: boom"),
        ("WRONG", "method wrong \\(.*\\) returned LlamaForCausalLM; adapt must return tapt.methods.Adapted"),
    ],
)
def test_a_method_that_raises_or_returns_the_wrong_type_is_named(
    attr, message, tmp_path, tiny_llama, data_dir
):
    (tmp_path / "broken.py").write_text(BROKEN)
    config = tiny_grid_config(
        tmp_path,
        tiny_llama,
        data_dir,
        tmp_path / "out",
        method=f"{tmp_path / 'broken.py'}:{attr}",
        subsamples=1,
    )
    with pytest.raises(SystemExit, match=message):
        main(["run", "--config", str(config)])
    assert not list((tmp_path / "out").rglob("accuracies.csv"))


@pytest.mark.parametrize("threshold, selected", [(0.0, 6), (100.0, 0)])
def test_tlm_learns_from_the_inputs_its_threshold_selects(
    threshold, selected, tmp_path, tiny_llama, data_dir
):
    """The tiny model's log-perplexity of every prompt is about log(vocabulary) = 10.8 nats: a
    threshold of 0 selects all 6 test inputs at every step, one of 100 none."""
    config = tiny_grid_config(
        tmp_path,
        tiny_llama,
        data_dir,
        tmp_path / "out",
        method="test-time-learning",
        method_settings={"test-time-learning": {"threshold": threshold}},
        exposure=False,
    )
    unit = flow.compute(plan.run_plan(load_config(config)).unit(UnitKey("ag_news", 0)))
    test = unit.record["training"]["test"]
    assert (test["selected"], test["seen"], test["threshold"]) == (selected, 6, threshold)


def test_train_with_a_method_saves_its_adapter_and_prints_the_lm_eval_command(
    tmp_path, tiny_llama, data_dir, capsys
):
    out = tmp_path / "adapter"
    argv = [
        "train",
        "--task",
        "ag_news",
        "--split",
        "test",
        "--m",
        "4",
        "--n",
        "6",
        "--base",
        str(tiny_llama),
    ]
    argv += ["--data-dir", str(data_dir), "--quantize", "none", "--out", str(out)]
    main([*argv, "--method", "test-time-learning", "--threshold", "0"])  # its settings are train's flags
    shown = capsys.readouterr().out
    assert f"peft={out}" in shown and "lm_eval --model hf" in shown
    record = json.loads((out / "tapt.json").read_text())
    assert (record["method"], record["selected"], record["method_settings"]["threshold"]) == (
        "test-time-learning",
        6,
        0,
    )
    with pytest.raises(SystemExit, match="--lamb must be at least 0.0, got -1"):
        main([*argv, "--overwrite", "--method", "test-time-learning", "--lamb", "-1"])
    capsys.readouterr()
    with pytest.raises(SystemExit):  # not prompt TAPT's
        main([*argv, "--overwrite", "--threshold", "0"])
    assert "unrecognized arguments: --threshold" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--method", "test-time-learning", "--help"])
    shown = capsys.readouterr().out
    assert "test-time-learning's settings:" in shown and "--threshold" in shown and "--packing" not in shown
    with pytest.raises(SystemExit, match="--method-settings: train takes a method's settings as its flags"):
        main([*argv, "--overwrite", "--method", "test-time-learning", "--method-settings", "{threshold: 0}"])


def test_a_bad_method_setting_is_named_with_the_method_before_anything_is_written(
    tmp_path, tiny_llama, data_dir
):
    out = tmp_path / "out"
    bad = {"test-time-learning": {"lamb": -1}}
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, out, method="test-time-learning", method_settings=bad
    )
    with pytest.raises(
        SystemExit, match="key 'method_settings' test-time-learning: key 'lamb' must be at least 0"
    ):
        main(["run", "--config", str(config)])
    other = {"self-training": {}}
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, out, method="test-time-learning", method_settings=other
    )
    with pytest.raises(
        SystemExit, match="key 'method_settings' names \\['self-training'\\], which this run does not"
    ):
        main(["run", "--config", str(config)])
    assert not out.exists()


@pytest.mark.slow
def test_several_methods_run_side_by_side_on_the_same_subsamples_and_share_the_base(
    tmp_path, tiny_llama, data_dir, capsys
):
    out = tmp_path / "out"
    settings = {"method_settings": {"test-time-learning": {"threshold": 0}}, "subsamples": 1}
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, out, methods=["prompt-tapt", "test-time-learning"], **settings
    )
    main(["run", "--config", str(config)])
    study, tlm = (
        grid_tables(out, "m4/n6/tiny/ag_news")[0],
        grid_tables(out, "m4/n6/tiny+test-time-learning/ag_news")[0],
    )
    assert study["base"].tolist() == tlm["base"].tolist()  # the same subsample, the same base
    first, shared = (
        json.loads((out / f"m4/n6/{m}/ag_news/units/0.json").read_text())
        for m in ("tiny", "tiny+test-time-learning")
    )
    assert shared["base_from"] == "tiny" and "base_from" not in first
    assert "score_base" in first["seconds"] and "score_base" not in shared["seconds"]  # scored once
    # the shared base is what TLM's own run scores: its accuracy, probabilities and exposure scores
    alone = tmp_path / "alone"
    main(
        [
            "run",
            "--config",
            str(
                tiny_grid_config(
                    tmp_path, tiny_llama, data_dir, alone, method="test-time-learning", **settings
                )
            ),
        ]
    )
    own = json.loads((alone / "m4/n6/tiny+test-time-learning/ag_news/units/0.json").read_text())
    assert (
        "base_from" not in own and own["exposure"]["scores"]["base"] == shared["exposure"]["scores"]["base"]
    )
    for got, want in zip(
        grid_tables(alone, "m4/n6/tiny+test-time-learning/ag_news"),
        grid_tables(out, "m4/n6/tiny+test-time-learning/ag_news"),
    ):
        pd.testing.assert_frame_equal(got, want)
    capsys.readouterr()
    main(["summarize", str(out)])
    shown = capsys.readouterr().out
    assert "model=tiny+test-time-learning:" in shown and "model=tiny:" in shown


@pytest.mark.slow
def test_tlm_weights_are_the_frozen_bases_log_perplexities(tmp_path, tiny_llama, data_dir):
    """Each input is weighed by the base's log-perplexity, the adapter off, even after steps at a high lr."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.core.engine import models
    from harness.tasks.protocol import find_spec, subsample_docs
    from tapt.methods import tlm

    config = tiny_grid_config(
        tmp_path,
        tiny_llama,
        data_dir,
        tmp_path / "out",
        method="test-time-learning",
        method_settings={"test-time-learning": {"threshold": 10.0, "lr": 0.05}},
        exposure=False,
    )
    cfg = load_config(config)
    unit = flow.compute(plan.run_plan(cfg).unit(UnitKey("ag_news", 0)))
    offline = [w for step in unit.record["training"]["test"]["weights"] for w in step]
    docs = subsample_docs(find_spec("ag_news"), cfg.sample, 0)["test"]
    tok, base = AutoTokenizer.from_pretrained(tiny_llama), AutoModelForCausalLM.from_pretrained(tiny_llama)
    with torch.no_grad():
        ids = [tok(p, truncation=True, max_length=models.MAX_LENGTH)["input_ids"] for p in docs["prompt"]]
        scored = [tlm.log_perplexity(base(torch.tensor([i])).logits, torch.tensor([i]))[0] for i in ids]
    expected = tlm.weights(torch.stack(scored), 10.0, 0.1).tolist()
    assert len(offline) == len(expected) == 6
    assert sorted(offline) == pytest.approx(sorted(expected), rel=1e-4)  # in the trainer's shuffled order


def test_tlm_online_rule_points_to_the_stream_condition():
    from tapt.methods import tlm

    with pytest.raises(SettingsError, match="rule.*must be 'offline', got 'online'.*stream_mode: carry"):
        tlm.TlmSettings(rule="online")


def test_tlm_online_trains_the_carried_adapter_on_weighted_by_the_current_model(tmp_path, tiny_llama):
    """The authors' online rule: the adapter of the chunk before trained on (the same model returned), each
    input weighed by the current model's log-perplexity (adapter on), at a constant lr."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.core.engine import models
    from harness.tasks.protocol import find_spec
    from tapt.methods import Inputs, tlm

    spec = find_spec("ag_news")
    tok, base = AutoTokenizer.from_pretrained(tiny_llama), AutoModelForCausalLM.from_pretrained(tiny_llama)
    docs = pd.DataFrame({"prompt": [f"Text {i}: a short news item." for i in range(4)], "row": range(4)})
    first = tlm.TlmSettings(threshold=0.0, lr=0.05)
    one = tlm.adapt(Inputs(base, tok, spec, docs[:2], first, 0, tmp_path / "a", online=True))
    assert one.record["selected_by"] == "current model"
    current = one.model
    ids = [tok(p, truncation=True, max_length=models.MAX_LENGTH)["input_ids"] for p in docs["prompt"][2:]]
    with torch.no_grad():
        on = [float(tlm.log_perplexity(current(torch.tensor([i])).logits, torch.tensor([i]))[0]) for i in ids]
        with current.disable_adapter():
            off = [
                float(tlm.log_perplexity(current(torch.tensor([i])).logits, torch.tensor([i]))[0])
                for i in ids
            ]
    assert min(abs(a - b) for a, b in zip(on, off)) > 1e-3  # the carried adapter moved the perplexities
    frozen = tlm.TlmSettings(threshold=0.0, lr=0.05)
    frozen.lr = 0.0  # lr 0 (which a user's setting may not be): the model each weight is read from stays put
    two = tlm.adapt(Inputs(current, tok, spec, docs[2:], frozen, 0, tmp_path / "b", online=True))
    assert two.model is current
    got = sorted(w for step in two.record["weights"] for w in step)
    assert got == pytest.approx(sorted(tlm.weights(torch.tensor(on), 0.0, 0.1).tolist()), rel=1e-4)


def test_a_built_in_method_is_one_row_of_the_table_and_listing_them_loads_no_torch(
    tmp_path, monkeypatch, capsys
):
    """A method file and its row in BUILT_IN (name -> module:METHOD): listed in the row's order and found,
    with nothing else edited; `methods list` imports no torch (each method loads it as it runs)."""
    (tmp_path / "my_builtin.py").write_text(
        "from harness.api import Adapted, Method, Settings\n"
        "METHOD = Method('my-builtin', ('zero_shot',), Settings, lambda x: Adapted(x.model), 'one file')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(methods.registry.BUILT_IN, "my-builtin", "my_builtin:METHOD")
    methods.builtin.cache_clear()
    try:
        assert methods.find("my-builtin").about == "one file"
        main(["methods", "list"])
        assert capsys.readouterr().out.splitlines()[-1].startswith("my-builtin")
    finally:
        monkeypatch.undo()
        methods.builtin.cache_clear()
    assert "my-builtin" not in methods.builtin()
    code = "import sys; from harness.cli.main import main; main(['methods', 'list']); "
    code += "print('torch' in sys.modules)"
    listed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert listed.stdout.split()[-1] == "False" and "test-time-rl" in listed.stdout


def test_prompt_tapt_prints_its_recipe_against_the_studys_code_with_a_source_per_row(capsys):
    from harness.cli.main import main
    from tapt.adapter import LORA, AdapterSettings

    main(["methods", "show", "prompt-tapt"])
    shown = capsys.readouterr().out
    table = shown[shown.index("the recipe against its authors' code") :].splitlines()[2:]
    assert len(table) == 12 and all(re.search(r"\((_dum|run)\.py:\d+|\.sh:\d+", row) for row in table)
    study = AdapterSettings()
    here = {row.split("  ")[0]: row for row in table}
    assert (
        f"r {LORA['r']}, alpha {LORA['lora_alpha']}, dropout {LORA['lora_dropout']}, all-linear"
        in here["LoRA"]
    )
    assert f"{study.epochs:g}, {study.batch_size}, {study.lr:g}" in here["epochs, batch, lr"]
    assert "unset: 256 padding, 2048 packing" in here["max length"]
    # the rows that name the study's configs hold because those configs set these keys
    import yaml

    from harness.grid.configuration.config import config_path, read

    def resolved(name):  # the config's keys and its prompt TAPT's settings, as a run reads them
        cfg = read(yaml.safe_load(config_path(name).read_text()), name)
        own = resolve.method_settings(cfg)
        return (
            cfg.grid.accuracy,
            cfg.sample.prompt_format,
            own.max_length,
            own.optim,
            own.gradient_checkpointing,
        ), own

    study = ("mean_token", "chat")
    for name, length in (("zero_shot", 512), ("zero_shot_epochs_2", 512), ("zero_shot_packing", 8192)):
        assert resolved(name)[0] == (*study, length, "paged_adamw_8bit", True), name
    assert resolved("zero_shot_packing")[1].batch_size == 1
    assert resolved("demo")[0][:3] == (*study, 512)


def test_tlms_recipe_cites_the_authors_code_per_row_and_its_same_rows_are_the_settings_that_run():
    from tapt.methods.tlm import RECIPE, TlmSettings

    rows = {line.split("  ")[0]: line for line in RECIPE.splitlines()[1:]}
    assert len(rows) == 11 and all(
        re.search(r"\((trainer|workflow|finetuning_args)\.py:|_ttl\.yaml:", r) for r in rows.values()
    )
    s = TlmSettings()  # the rows that say "the same" hold because these are the authors' values
    assert (s.threshold, s.lamb, s.lr, s.batch_size, s.epochs, s.warmup_ratio) == (
        3.0,
        0.1,
        5e-5,
        1,
        1.0,
        0.1,
    )
    assert (s.lora_r, s.lora_alpha, s.target_modules) == (8, 16, ["q_proj", "v_proj"])
    from harness.grid.grid_settings import GridSettings

    grid = GridSettings()  # the online row holds because the stream carries, in chunks of 8, by default
    assert (grid.stream_mode, grid.stream_chunk_size) == ("carry", 8)
    assert "stream_mode carry, stream_chunk_size 8" in rows["online setting"]


def test_raw_texts_recipe_cites_the_studys_code_per_row_and_its_same_rows_are_the_settings_that_run():
    from harness.core.engine import models
    from tapt.methods.raw_text import RECIPE
    from tapt.methods.raw_text.pretrain import MLM_PROBABILITY, TextSettings

    rows = {line.split("  ")[0]: line for line in RECIPE.splitlines()[1:]}
    assert len(rows) == 7 and all(
        re.search(r"\((run|pretrain|_config)\.py:|\.sh:\d+", r) for r in rows.values()
    )
    assert (MLM_PROBABILITY, models.MAX_LENGTH) == (0.15, 256)
    s = TextSettings()  # the batch is the study's with the per-task settings; the lr row says why it differs
    assert (s.pretrain_batch_size, s.pretrain_lr) == (16, 5e-5)
    assert "bert_1.sh:9" in rows["batch"] and "bert_2.sh:10" in rows["batch"]
    assert "the shipped configs of the study set the study's" in rows["lr"]


def test_self_trainings_recipe_cites_a_source_per_row_and_its_same_rows_are_the_settings_that_run():
    from tapt.adapter import AdapterSettings
    from tapt.methods.self_training import RECIPE, SelfTrainingSettings

    rows = {line.split("  ")[0]: line for line in RECIPE.splitlines()[1:]}
    assert len(rows) == 7 and all(re.search(r"eq\. \d+|\.(py|sh):\d+", r) for r in rows.values())
    s, study = SelfTrainingSettings(), AdapterSettings()
    assert s.min_confidence == 0 and "every input" in rows["kept"]
    assert (s.epochs, s.batch_size, s.lr) == (study.epochs, study.batch_size, study.lr) == (1.0, 8, 2e-4)


def test_self_training_learns_its_pseudo_labels_tokens_alone_as_the_study_learns_labels(tiny_llama, data_dir):
    """The training rows hold prompt + ' ' + label; the loss reads the label's tokens only (labels -100 on
    the prompt's), and those tokens are the class lm-eval scores; with completion_only false, every token."""
    from harness.core.engine import loglik, models
    from harness.tasks.protocol import SplitSettings, find_spec, subsample_docs
    from tapt import adapter

    spec = find_spec("ag_news")
    docs = subsample_docs(spec, SplitSettings(task="ag_news", m=4, n=6, data_dir=str(data_dir)), 0)["test"]
    tok = models.tokenizer(str(tiny_llama))
    gold = [spec.target_delimiter + c[int(y)] for c, y in zip(docs["choices"], docs["label"])]
    data = adapter.completion_only(tok, list(docs["prompt"]), gold, 512)
    for ids, labels, prompt, answer in zip(data["input_ids"], data["labels"], docs["prompt"], gold):
        trained = [t for t in labels if t != -100]
        assert (
            trained == loglik.encode_pair(tok, prompt, answer)[1]
        )  # the class's tokens as lm-eval scores them
        assert labels[: len(ids) - len(trained)] == [-100] * (len(ids) - len(trained))
