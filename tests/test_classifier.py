"""The classifier flow: the head, what the raw-text TAPT reads, training, and the grid's guarantees."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings

import pandas as pd
import pytest
import torch
from helpers import grid_tables, write_grid_config

import harness
from harness import merge
from harness.core.plumbing.errors import SettingsError, UserError
from harness.grid.configuration import config as grid_config
from harness.grid.configuration.run_checks import load_run
from harness.scoring.classifier import ClassifierSettings, classify, load_classifier
from harness.tasks.protocol import subsample_docs
from harness.tasks.spec import load_spec
from harness.tasks.subsample import SampleSettings
from tapt.methods.raw_text.pretrain import TextArgs, pretrain_text

TASK_DIR = "m8/n8/tiny/trec"


def config(tmp_path, base, data_dir, out, **extra):
    cfg = {
        "base": str(base),
        "model_tag": "tiny",
        "flow": "classifier",
        "tasks": ["trec"],
        "m": 8,
        "n": 8,
        "subsamples": 2,
        "method_settings": {"raw-text": {"pretrain_epochs": 1, "pretrain_batch_size": 4}},
        "clf_epochs": 2,
        "clf_batch_size": 4,
        "clf_lr": 1e-3,
        "eval_batch_size": 8,
        "data_dir": str(data_dir),
        **extra,
    }
    return write_grid_config(tmp_path, out, cfg)


def tables(out):
    return grid_tables(out, TASK_DIR)


@pytest.mark.parametrize(
    "which, side", [("tiny_bert", None), ("tiny_llama", "right"), ("tiny_llama", "left")]
)
def test_the_head_reads_cls_or_the_last_non_pad_token_whatever_the_padding(which, side, request):
    model, tok = load_classifier(str(request.getfixturevalue(which)), 3, seed=0)
    model.eval()
    assert tok.padding_side == "right"  # what classify uses: [CLS] stays at position 0
    tok.padding_side = side or tok.padding_side  # a decoder finds its last non-pad token with either
    texts = ["a short one", "a much longer text that needs many more tokens than the first"]
    with torch.no_grad():
        alone = model(**tok(texts[:1], return_tensors="pt")).logits[0]
        batched = model(**tok(texts, return_tensors="pt", padding=True)).logits[0]
    assert torch.allclose(alone, batched, atol=1e-4), (alone, batched)


def test_raw_text_tapt_on_test_reads_exactly_the_test_texts(tiny_bert, data_dir, tmp_path):
    rec = pretrain_text(
        TextArgs(
            task="trec",
            split="test",
            base=str(tiny_bert),
            out=tmp_path / "m",
            data_dir=str(data_dir),
            m=8,
            n=8,
            pretrain_batch_size=4,
        )
    )
    docs = subsample_docs(load_spec("trec"), SampleSettings(data_dir=str(data_dir), m=8, n=8), 0)
    assert rec["rows"] == docs["test"]["row"].tolist() and rec["sequences"] == 8
    assert not set(rec["rows"]) & set(docs["train"]["row"])


def test_classifier_loss_decreases_and_a_rerun_gives_the_same_numbers(tiny_bert, data_dir):
    sample = SampleSettings(data_dir=str(data_dir), m=24, n=8, train_draw="proportional")
    docs = subsample_docs(load_spec("trec"), sample, 0)
    settings = ClassifierSettings(clf_epochs=6, clf_batch_size=8, clf_lr=1e-3)
    scored, log = classify(str(tiny_bert), docs["train"], docs["test"], 6, settings, 8, seed=3)
    assert log["losses"][-1] < log["losses"][0]
    again, _ = classify(str(tiny_bert), docs["train"], docs["test"], 6, settings, 8, seed=3)
    pd.testing.assert_frame_equal(scored, again)
    probs = pd.DataFrame(scored["probs"].tolist())
    assert probs.shape == (8, 6) and (probs.idxmax(axis=1) == scored["label"]).eq(scored["correct"]).all()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, tiny_llama, data_dir):
    tmp = tmp_path_factory.mktemp("clf")
    harness.run(config(tmp, tiny_llama, data_dir, tmp / "full"))
    return tmp / "full"


def test_layout_and_the_units_record(uninterrupted):
    acc, probs = tables(uninterrupted)
    assert (
        list(acc.columns) == ["base", "extra", "test", "majority", "num_classes", "majority_all"]
        and len(acc) == 2
    )
    assert set(probs["condition"]) == {"base", "extra", "test"} and len(probs) == 2 * 3 * 8
    unit = json.loads((uninterrupted / TASK_DIR / "units" / "1.json").read_text())
    assert set(unit["training"]) == {
        "pretrain_extra",
        "pretrain_test",
        "classify_base",
        "classify_extra",
        "classify_test",
    }
    assert unit["settings"]["flow"] == "classifier" and "quantize" not in unit["settings"]


@pytest.mark.slow
def test_the_exposure_setting_scores_each_pretrained_encoder_on_its_raw_texts(tmp_path, tiny_bert, data_dir):
    out = tmp_path / "exposed"
    harness.run(config(tmp_path, tiny_bert, data_dir, out, subsamples=1, exposure=True))
    exposure = json.loads((out / TASK_DIR / "units" / "0.json").read_text())["exposure"]
    assert set(exposure["tests"]) == {"base", "extra", "test"} and len(exposure["docs"]["row"]) == 16
    assert [exposure["tests"][c]["calibrated"] for c in ("base", "extra", "test")] == [False, True, True]
    base, test = (exposure["scores"][c]["text"] for c in ("base", "test"))
    assert base != test  # the pretrained encoder reads the texts differently from its base


@pytest.mark.slow
def test_sigkill_mid_unit_then_rerun_equals_uninterrupted(uninterrupted, tmp_path, tiny_llama, data_dir):
    cfg = config(tmp_path, tiny_llama, data_dir, tmp_path / "killed")
    cmd = [sys.executable, "-m", "harness.cli", "run", "--config", str(cfg), "--no-summary"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    logs = tmp_path / "killed" / "m8/n8/tiny/logs"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:  # until unit 1 is half done
        if any("trec subsample 1: extra done" in p.read_text() for p in logs.glob("*.log")):
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = sorted(p.name for p in (tmp_path / "killed" / TASK_DIR / "units").glob("*.json"))
    assert done == ["0.json"], done
    harness.run(cfg)  # the same command resumes; here in this process
    for got, want in zip(tables(tmp_path / "killed"), tables(uninterrupted)):
        pd.testing.assert_frame_equal(got, want)


@pytest.mark.slow
def test_a_shard_recomputes_its_unit_and_merges_with_the_rest_into_the_unsharded_run(
    uninterrupted, tmp_path, tiny_llama, data_dir
):
    harness.run(config(tmp_path, tiny_llama, data_dir, tmp_path / "s1"), shard="1/2")
    rest = tmp_path / "s0"  # shard 0/2 of the shared run: its unit 0
    shutil.copytree(uninterrupted, rest)
    for path in (rest / TASK_DIR / "units").glob("1.*"):
        path.unlink()
    merge([rest, tmp_path / "s1"], tmp_path / "merged")
    for got, want in zip(tables(tmp_path / "merged"), tables(uninterrupted)):
        pd.testing.assert_frame_equal(got, want)


@pytest.mark.slow
def test_two_workers_write_the_same_results(uninterrupted, tmp_path, tiny_llama, data_dir):
    from harness.cli.main import main

    main(
        [
            "run",
            "--config",
            str(config(tmp_path, tiny_llama, data_dir, tmp_path / "w")),
            "--workers",
            "2",
            "--no-summary",
        ]
    )
    for got, want in zip(tables(tmp_path / "w"), tables(uninterrupted)):
        pd.testing.assert_frame_equal(got, want)
    manifests = sorted(p.name for p in (tmp_path / "w" / "m8/n8/tiny").glob("manifest-*.json"))
    assert manifests == ["manifest-shard0of1.json"]  # one run, one lock: its workers are its own processes


def test_bad_input(tmp_path, tiny_bert, tiny_llama, data_dir):
    with pytest.raises(
        SettingsError,  # other tests' plug-in flows may be registered in this process too
        match="key 'flow' no flow 'clasifier': the flows are classifier, zero_shot, (.*, )?or your",
    ):
        load_run(config(tmp_path, tiny_bert, data_dir, tmp_path / "a", flow="clasifier"))
    with pytest.raises(UserError, match="m=4 is smaller than the number of classes \\(6\\)"):
        load_run(config(tmp_path, tiny_bert, data_dir, tmp_path / "b", m=4))
    with pytest.raises(SettingsError, match="key 'task_overrides' trec: \\['m'\\] cannot be set per task"):
        load_run(config(tmp_path, tiny_bert, data_dir, tmp_path / "c", task_overrides={"trec": {"m": 4}}))
    # an encoder saved without its MLM head: pretraining warns that the head starts random, then runs
    from transformers import BertModel

    headless = tmp_path / "headless"
    BertModel.from_pretrained(tiny_bert).save_pretrained(headless)
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(headless)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = pretrain_text(
            TextArgs(
                task="trec",
                split="extra",
                base=str(headless),
                out=tmp_path / "p",
                data_dir=str(data_dir),
                m=8,
                n=8,
                pretrain_batch_size=4,
            )
        )
    assert rec["mlm_head_was_new"] and any("has no MLM head" in str(w.message) for w in caught)
    # a decoder whose tokenizer has no pad token pads with EOS
    tok = AutoTokenizer.from_pretrained(tiny_llama)
    nopad = tmp_path / "nopad"
    tok.pad_token = None
    tok.save_pretrained(nopad)
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(tiny_llama).save_pretrained(nopad)
    model, tok = load_classifier(str(nopad), 3, seed=0)
    assert tok.pad_token == tok.eos_token and model.config.pad_token_id == tok.eos_token_id


def test_shipped_configs_by_name_or_as_configs_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert grid_config.config_path("demo_classifier") == grid_config.CONFIGS_DIR / "demo_classifier.yaml"
    assert (
        grid_config.config_path("configs/demo_classifier.yaml")
        == grid_config.CONFIGS_DIR / "demo_classifier.yaml"
    )
    own = tmp_path / "configs" / "demo_classifier.yaml"  # a user's own file of that name wins
    own.parent.mkdir()
    own.write_text("base: x\n")
    assert grid_config.config_path("configs/demo_classifier.yaml") == own.relative_to(tmp_path)
    assert grid_config.config_path("configs/nope.yaml") == tmp_path.joinpath("configs/nope.yaml").relative_to(
        tmp_path
    )
