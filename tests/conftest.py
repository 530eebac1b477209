"""Shared fixtures: the offline data dir, and tiny random-weight models with real tokenizers."""

from __future__ import annotations

from pathlib import Path

import json

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA_DIR = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA_DIR.is_dir():
        pytest.skip(f"offline data not found at {DATA_DIR}")
    return DATA_DIR


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    from harness.core import models

    return models.prepare(models.SMOLLM2)


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory, smollm2_dir) -> Path:
    """A 2-layer Llama with random weights and SmolLM2's real tokenizer, saved as a model dir."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      tie_word_embeddings=True, pad_token_id=tok.pad_token_id,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    out = tmp_path_factory.mktemp("tiny_llama")
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    """A 2-layer BERT with random weights and all-MiniLM-L6-v2's real tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from harness.core import models

    tok = AutoTokenizer.from_pretrained(models.prepare(models.MINILM))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=4, max_position_embeddings=512)
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
    """A zero-shot grid config on the tiny Llama: ag_news, m 4, n 6, 3 subsamples (TASK_DIR m4/n6/tiny/ag_news)."""
    cfg = {"base": str(tiny_llama), "model_tag": "tiny", "tasks": ["ag_news"], "m": 4, "n": 6,
           "subsamples": 3, "quantize": "none", "lr": 0.01, "batch_size": 4, "eval_batch_size": 8,
           "data_dir": str(data_dir), **extra}
    return write_grid_config(tmp_path, out, cfg)


def grid_tables(out: Path, task_dir: str):
    """The two tables a grid run leaves in a task dir: accuracies.csv and probabilities.parquet."""
    import pandas as pd

    d = out / task_dir
    return pd.read_csv(d / "accuracies.csv"), pd.read_parquet(d / "probabilities.parquet")
