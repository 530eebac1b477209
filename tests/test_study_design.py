"""The study's design as a unit runs it: train drawn int(m / K) a class, the study's columns, a leak whose
class name survives the cut, and the heads' seeding named and recorded."""

import json

import numpy as np
import pandas as pd
import pytest
from helpers import write_grid_config

import harness
from harness.core.plumbing.errors import SettingsError, UserError
from harness.tasks.subsample import draw, train_counts
from tapt.corpus import keeping_answers, raw_texts

HATE = "tweets_hate_speech_detection"


@pytest.fixture(scope="module")
def hate_data(tmp_path_factory, data_dir):
    """Made-up tweets in tweets_hate_speech_detection's shape: 1,000 rows, 93% of them class 0."""
    folder = tmp_path_factory.mktemp("hate")
    rng = np.random.default_rng(0)
    words = ("sun rain city game food music team love day night friends work".split(), "hate slur".split())
    labels = np.repeat([0, 1], [930, 70])
    rng.shuffle(labels)
    texts = [" ".join(rng.choice(words[y] + words[0], size=8)) for y in labels]
    (folder / HATE).mkdir()
    pd.DataFrame({"text": texts, "label": labels}).to_parquet(folder / HATE / "data.parquet")
    for slug in ("trec",):  # a task of the repository's fixtures beside it
        (folder / slug).symlink_to(data_dir / slug)
    return folder


def one_unit(tmp_path, tiny_bert, data_dir, task=HATE, m=50, n=8, **extra) -> dict:
    cfg = {
        "base": str(tiny_bert),
        "model_tag": "tiny",
        "flow": "classifier",
        "tasks": [task],
        "m": m,
        "n": n,
        "subsamples": 1,
        "conditions": ["base", "extra", "test", "leak"],
        "method_settings": {"raw-text": {"pretrain_epochs": 1, "pretrain_batch_size": 8}},
        "clf_epochs": 1,
        "clf_batch_size": 25,
        "eval_batch_size": 25,
        "data_dir": str(data_dir),
        **extra,
    }
    out = tmp_path / "out"
    harness.run(write_grid_config(tmp_path, out, cfg))
    return json.loads((out / f"m{m}/n{n}/tiny/{task}/units/0.json").read_text())


def test_a_unit_at_m_50_of_a_task_93_percent_one_class_trains_on_25_of_each(tmp_path, tiny_bert, hate_data):
    unit = one_unit(tmp_path, tiny_bert, hate_data)
    assert unit["draw"] == {"train": "balanced", "train_counts": [25, 25]}
    assert unit["settings"]["train_draw"] == "balanced"
    # the study's columns: the test subsample's majority share, and the pool's (930 of 1,000)
    assert unit["majority_all"] == 0.93 and unit["majority"] >= 0.5 and unit["num_classes"] == 2
    # the head's answers on train and extra (never test), for the pilot's screen
    screen = unit["training"]["classify_base"]["screen"]
    assert {s: v["documents"] for s, v in screen.items()} == {"train": 50, "extra": 8}
    assert "test" not in screen


def test_the_proportional_draw_stays_a_setting_and_is_recorded(tmp_path, tiny_bert, hate_data):
    unit = one_unit(tmp_path, tiny_bert, hate_data, train_draw="proportional")
    assert unit["draw"] == {"train": "proportional", "train_counts": [47, 3]}
    assert "train_draw" not in unit["settings"]  # as every unit before the setting recorded it


def test_the_balanced_draw_is_the_studys_int_m_over_k_of_each_class():
    labels = np.repeat([0, 1, 2, 3], [500, 300, 150, 50])
    assert train_counts(np.bincount(labels), 40, "balanced").tolist() == [10, 10, 10, 10]
    assert train_counts(np.bincount(labels), 50, "balanced").tolist() == [12, 12, 12, 12]  # 48 of 50
    sub = draw(labels, 0, m=18 * 2 + 1, n=100, seed=0)  # 37 over 4 classes: 9 each
    assert np.bincount(labels[sub.train]).tolist() == [9, 9, 9, 9]
    with pytest.raises(UserError, match="class 3 has 5 in the pool.*train_draw: proportional"):
        train_counts(np.array([500, 300, 150, 5]), 40, "balanced")


def test_the_majority_columns_are_the_studys(tmp_path, tiny_bert, data_dir):
    """majority: the test subsample's most frequent class share (experiment.py:
    df_test["label"].value_counts(normalize=True).max()); majority_all: the pool's."""
    from harness.tasks.protocol import subsample_docs
    from harness.tasks.spec import load_spec
    from harness.tasks.subsample import SampleSettings

    unit = one_unit(tmp_path, tiny_bert, data_dir, task="trec", m=12, n=20)
    docs = subsample_docs(load_spec("trec"), SampleSettings(data_dir=str(data_dir), m=12, n=20), 0)
    pool = pd.read_parquet(data_dir / "trec" / "data.parquet")
    assert unit["majority"] == docs["test"]["label"].value_counts(normalize=True).max()
    assert unit["majority_all"] == pool["label"].value_counts(normalize=True).max()
    # what the two names meant before, under names of their own
    top = int(np.bincount(docs["train"]["label"], minlength=6).argmax())
    assert unit["train_majority"] == (docs["test"]["label"] == top).mean()
    assert unit["chance"] == pytest.approx(1 / 6)
    from harness.results import collect
    from harness.stats.summary.summary import summarize

    config = summarize(collect(tmp_path / "out"))["configs"][0]  # summarize reads it from the test documents
    above = int(unit["base"] > unit["majority"])
    assert (config["base_above_majority"], config["majority_units"]) == (above, 1)
    table = pd.read_csv(tmp_path / "out/m12/n20/tiny/trec/accuracies.csv")
    assert table["majority"].tolist() == [unit["majority"]] and table["majority_all"].tolist() == [
        unit["majority_all"]
    ]


def test_the_leak_keeps_its_class_name_however_long_the_text(tiny_bert):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    docs = pd.DataFrame(
        {"text": ["word " * 600, "a short text"], "label": [1, 0], "choices": [["no", "hate speech"]] * 2}
    )
    ids = keeping_answers(tok, raw_texts(docs, answers=True), 256)
    label = tok("hate speech", add_special_tokens=False)["input_ids"]
    assert len(ids[0]) == 256 and ids[0][-1 - len(label) : -1] == label  # [SEP] last
    # a text that fits is tokenized whole, as before the rule
    assert ids[1] == tok("a short text\nno", truncation=True, max_length=256)["input_ids"]
    unlabeled = keeping_answers(tok, raw_texts(docs), 256)
    assert unlabeled == tok(list(docs["text"]), truncation=True, max_length=256)["input_ids"]


def test_the_leak_trains_tests_documents_and_steps_its_strength_the_copies_of_each_class_name(
    tmp_path, tiny_bert, data_dir
):
    """Matched steps: extra, test and leak each read 20 documents for the same optimizer steps; strength 3
    writes each class name 3 times after its text, all masked on every read (the planted bug, the
    leak's documents multiplied again, gives it 60 sequences and 3 times the steps)."""
    unit = one_unit(tmp_path, tiny_bert, data_dir, task="trec", m=12, n=20, leak_strength=3)
    pre = {c: unit["training"][f"pretrain_{c}"] for c in ("extra", "test", "leak")}
    assert {c: r["sequences"] for c, r in pre.items()} == {"extra": 20, "test": 20, "leak": 20}
    assert len({r["steps"] for r in pre.values()}) == 1
    control = unit["control"]
    assert control["steps"] == {c: r["steps"] for c, r in pre.items()}
    assert control["tokens_seen"]["leak"] > control["tokens_seen"]["test"]  # the class names, not documents
    assert pre["leak"]["answers_not_found"] == 0 and pre["leak"]["answer_tokens"] >= 3 * 20
    assert set(control["gold_log_probs"]) == {"base", "extra", "test", "leak"}
    assert all(len(v) == 20 for v in control["gold_log_probs"].values())
    assert unit["settings"]["leak_strength"] == 3 and unit["settings"]["leak_plant"] == "answers"
    with pytest.raises(SettingsError, match="leak_strength.*no leak is planted"):
        one_unit(
            tmp_path, tiny_bert, data_dir, task="trec", conditions=["base", "extra", "test"], leak_strength=2
        )
    with pytest.raises(SettingsError, match="leak_strength' must be below 17"):
        one_unit(tmp_path, tiny_bert, data_dir, task="trec", leak_strength=1_000_000_000)


def test_the_leaks_class_names_are_masked_on_every_read_and_its_text_at_15_percent(tiny_bert):
    from harness.core.engine import models
    from tapt.corpus import answer_masks
    from tapt.methods.raw_text.pretrain import AnswerMasked, collator

    tok = models.tokenizer(str(tiny_bert))
    pairs = raw_texts(
        pd.DataFrame({"text": ["what is a cat"] * 64, "choices": [["DESC", "NUM"]] * 64, "label": [1] * 64}),
        answers=True,
        copies=2,
    )
    ids = keeping_answers(tok, pairs, 256)
    marks = answer_masks(tok, ids, pairs)
    assert all(sum(m) == 2 * len(tok("NUM", add_special_tokens=False)["input_ids"]) for m in marks)
    batch = AnswerMasked(collator(tok, decoder=False), tok)(
        [{"input_ids": i, "answer_mask": m} for i, m in zip(ids, marks)]
    )
    forced = np.array(marks, bool)
    assert (batch["input_ids"].numpy()[forced] == tok.mask_token_id).all()
    assert (batch["labels"].numpy()[forced] == np.array(ids)[forced]).all()
    text_masked = (batch["labels"].numpy()[~forced] != -100).mean()
    assert 0.05 < text_masked < 0.30  # the text's tokens at the collator's 15%, not all


def test_per_condition_heads_start_apart_and_tied_heads_alike(tmp_path, tiny_bert, data_dir):
    from harness.grid.unit.flows.classifier import head_seed
    from harness.scoring.classifier import ClassifierSettings

    tied, apart = ClassifierSettings(), ClassifierSettings(head_seed="per_condition")
    assert {head_seed(tied, 9, 2, c) for c in ("base", "extra", "test", "leak")} == {11}
    assert len({head_seed(apart, 9, 2, c) for c in ("base", "extra", "test", "leak")}) == 4
    unit = one_unit(tmp_path, tiny_bert, data_dir, task="trec", m=12, n=20, head_seed="per_condition")
    assert unit["settings"]["head_seed"] == "per_condition"


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_the_studys_configs_plan_its_per_task_settings_as_its_launch_scripts_set_them(name):
    """kddubey/pretrain-on-test's BERT launch scripts: enron_spam and yelp_review_full at batch 4, 1 epoch
    (bert_2.sh); yahoo_answers_topics 1 epoch (bert_1.sh); the long-text tasks batch 8 (bert_3.sh,
    bert_4.sh); the rest 3 epochs at batch 16; every pretraining at lr 1e-4 (pretrain.py)."""
    import yaml

    from harness.grid.configuration import resolve
    from harness.grid.configuration.config import CONFIGS_DIR, read

    cfg = read(yaml.safe_load((CONFIGS_DIR / f"{name}.yaml").read_text()), name).run_configs()[0]
    planned = {}
    for task in ("enron_spam", "yelp_review_full", "yahoo_answers_topics", "movie_rationales", "ag_news"):
        one = resolve.for_task(cfg, task)
        text = resolve.method_settings(one, task)
        planned[task] = (
            one.head.clf_batch_size,
            one.head.clf_epochs,
            text.pretrain_batch_size,
            text.pretrain_lr,
        )
    assert planned == {
        "enron_spam": (4, 1.0, 8, 1e-4),
        "yelp_review_full": (4, 1.0, 8, 1e-4),
        "yahoo_answers_topics": (16, 1.0, 8, 1e-4),
        "movie_rationales": (8, 1.0, 8, 1e-4),
        "ag_news": (16, 3.0, 16, 1e-4),
    }
