"""Shared fixtures: the offline data and reference dirs, tiny random-weight models with real tokenizers,
and one tiny zero-shot grid run that the tests which only read its results share."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
DATA_DIR = SHARED / "data"
REFERENCE = SHARED / "reference"
TINY_GRID_DIR = "m4/n6/tiny/ag_news"  # the task dir of tiny_grid_config's runs


def shared_path(path: Path) -> Path:
    """A folder of ../shared: skipped where it is missing, except under CI (CI=true), where it fails."""
    if not path.is_dir():
        message = f"{path} not found: the tests read the offline samples in ../shared beside the checkout"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return shared_path(DATA_DIR)


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    return shared_path(REFERENCE)


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> Path:
    """A 2-layer Llama with random weights and SmolLM2's real tokenizer (read from its GGUF, not
    from the dequantised model), saved as a model dir."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from harness.core import models

    tok = models.embedded_tokenizer(models.SMOLLM2)
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    out = tmp_path_factory.mktemp("tiny_llama")
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    """A 2-layer BERT with random weights and all-MiniLM-L6-v2's real tokenizer."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from harness.core import models

    tok = models.embedded_tokenizer(models.MINILM)
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=512,
    )
    out = tmp_path_factory.mktemp("tiny_bert")
    BertForMaskedLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def write_grid_config(tmp_path: Path, out: Path, cfg: dict) -> Path:
    """A grid config file named after its output dir, for the grid tests of both flows."""
    path = tmp_path / f"{out.name}.yaml"
    path.write_text(json.dumps({**cfg, "out": str(out)}))
    return path


def tiny_grid_config(tmp_path: Path, tiny_llama: Path, data_dir: Path, out: Path, **extra) -> Path:
    """A zero-shot grid config on the tiny Llama: ag_news, m 4, n 6, 3 subsamples, the four conditions
    and the exposure test (TINY_GRID_DIR m4/n6/tiny/ag_news). Every run of it computes the same numbers."""
    cfg = {
        "base": str(tiny_llama),
        "model_tag": "tiny",
        "tasks": ["ag_news"],
        "m": 4,
        "n": 6,
        "subsamples": 3,
        "conditions": ["base", "extra", "test", "leak"],
        "exposure": True,
        "quantize": "none",
        "lr": 0.01,
        "batch_size": 4,
        "eval_batch_size": 8,
        "data_dir": str(data_dir),
        **extra,
    }
    return write_grid_config(tmp_path, out, cfg)


@pytest.fixture(scope="session")
def tiny_grid(tmp_path_factory, tiny_llama, data_dir) -> Path:
    """One uninterrupted run of tiny_grid_config, shared by every test that only reads it or compares
    another run with it (resumed, sharded, on Ray)."""
    from harness.grid.config import load_config
    from harness.grid.run import run

    tmp = tmp_path_factory.mktemp("tiny_grid")
    run(load_config(tiny_grid_config(tmp, tiny_llama, data_dir, tmp / "full")))
    return tmp / "full"


def grid_tables(out: Path, task_dir: str = TINY_GRID_DIR):
    """The two tables a grid run leaves in a task dir: accuracies.csv and probabilities.parquet."""
    import pandas as pd

    d = out / task_dir
    return pd.read_csv(d / "accuracies.csv"), pd.read_parquet(d / "probabilities.parquet")


def write_plain_tasks(folder: Path, data_dir: Path, rows: int = 240) -> Path:
    """Two plain lm-eval multiple-choice tasks over local JSONL files, neither in the tapt_* form:
    `my_reviews` (rotten_tomatoes: fixed choices, the gold a string) and `my_questions` (trec: three
    choices per question, drawn per doc, the gold an integer index; with a training split)."""
    import numpy as np
    import pandas as pd

    from harness.tasks.spec import load_spec

    folder.mkdir(parents=True, exist_ok=True)
    pool = pd.read_parquet(data_dir / "rotten_tomatoes" / "data.parquet")  # sorted by label: take both
    reviews = pd.concat([pool[pool["label"] == y].iloc[: rows // 2] for y in (0, 1)]).sample(
        frac=1, random_state=0
    )
    reviews.assign(sentiment=reviews["label"].map({0: "negative", 1: "positive"})).drop(
        columns="label"
    ).to_json(folder / "reviews.jsonl", orient="records", lines=True)
    classes = load_spec("trec").classes
    rng = np.random.default_rng(0)
    questions = []
    for text, label in (
        pd.read_parquet(data_dir / "trec" / "data.parquet").iloc[: 2 * rows].itertuples(index=False)
    ):
        options = [classes[label], *rng.choice([c for c in classes if c != classes[label]], 2, replace=False)]
        order = rng.permutation(3)
        questions.append(
            {"question": text, "options": [options[i] for i in order], "answer": int(np.argmin(order))}
        )
    for name, part in (("questions_test", questions[:rows]), ("questions_train", questions[rows:])):
        pd.DataFrame(part).to_json(folder / f"{name}.jsonl", orient="records", lines=True)
    (folder / "my_reviews.yaml").write_text(
        "task: my_reviews\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {folder / 'reviews.jsonl'}\n"
        "output_type: multiple_choice\n"
        "test_split: test\n"
        'doc_to_text: "Review: {{text}}\\nSentiment:"\n'
        "doc_to_choice: [negative, positive]\n"
        'doc_to_target: "{{sentiment}}"\n'
        "metric_list:\n  - metric: acc\n  - metric: acc_norm\n"
    )
    (folder / "my_questions.yaml").write_text(
        "task: my_questions\n"
        "dataset_path: json\n"
        "dataset_kwargs:\n  data_files:\n"
        f"    test: {folder / 'questions_test.jsonl'}\n    train: {folder / 'questions_train.jsonl'}\n"
        "output_type: multiple_choice\n"
        "training_split: train\n"
        "test_split: test\n"
        'description: "Name the type of thing each question asks for.\\n\\n"\n'
        'doc_to_text: "Question: {{question}}\\nAnswer type:"\n'
        "doc_to_choice: options\n"
        "doc_to_target: answer\n"
        "metric_list:\n  - metric: acc\n"
    )
    return folder
