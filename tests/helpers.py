"""Helpers the tests share (fixtures are in conftest.py): grid configs on the tiny Llama, the tables a
grid run leaves, two plain lm-eval tasks, and a tiny Llama that memorised chosen prompts."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import LlamaForCausalLM

from harness.core.engine import loglik

TINY_GRID_DIR = "m4/n6/tiny/ag_news"  # the task dir of tiny_grid_config's runs


def write_grid_config(tmp_path: Path, out: Path, cfg: dict) -> Path:
    """A grid config file named after its output dir, for the grid tests of both flows."""
    path = tmp_path / f"{out.name}.yaml"
    path.write_text(json.dumps({**cfg, "out": str(out)}))
    return path


def tiny_grid_config(tmp_path: Path, tiny_llama: Path, data_dir: Path, out: Path, **extra) -> Path:
    """A zero-shot grid config on the tiny Llama: ag_news, m 4, n 6, 3 subsamples, the four conditions
    and the exposure test (TINY_GRID_DIR m4/n6/tiny/ag_news). Every run of it computes the same numbers."""
    from harness.core.plumbing.settings import field_names
    from harness.grid.configuration.config import GridConfig
    from tapt.adapter import AdapterSettings

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
        "eval_batch_size": 8,
        "data_dir": str(data_dir),
    }
    own = set(field_names(AdapterSettings)) - set(field_names(GridConfig))  # prompt TAPT's (`epochs=2`)
    sections = dict(extra.pop("method_settings", {}))
    given = {k: extra.pop(k) for k in list(extra) if k in own}
    if "prompt-tapt" in (extra.get("methods") or [extra.get("method") or "prompt-tapt"]):
        sections["prompt-tapt"] = {"lr": 0.01, "batch_size": 4, **given, **sections.get("prompt-tapt", {})}
    return write_grid_config(tmp_path, out, cfg | extra | ({"method_settings": sections} if sections else {}))


TIMES = ("seconds", "seconds_per_step", "record_hash")  # how long a unit took (and the hash that reads it)


def without_times(value):
    """A unit's record without how long its parts took."""
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k not in TIMES}
    return value


ALL_CONDITIONS = ["base", "extra", "test", "leak", "stream"]


def one_unit(tmp_path: Path, tiny_llama: Path, data_dir: Path, method: str, settings: dict, **extra) -> dict:
    """The record of one unit of tiny_grid_config with every condition (the stream in 2 chunks of 3), run by
    `method` with its `settings`."""
    import harness

    if settings:
        extra["method_settings"] = {method: settings}
    extra = {"conditions": ALL_CONDITIONS, "stream_chunk_size": 3, **extra}
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, tmp_path / "out", method=method, subsamples=1, **extra
    )
    harness.run(config)
    (unit_file,) = (tmp_path / "out").rglob("units/0.json")
    return json.loads(unit_file.read_text())


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


class Planted(LlamaForCausalLM):
    """A tiny Llama that memorised some prompts: on a row that is one of them, it raises the logit of
    each next token of the prompt's own text by `bonus`, and with `answers`, the first token of the
    prompt's answer where the answer starts. Every other row's logits are the base's, bit for bit."""

    memorised: dict = {}
    bonus = 4.0

    def forward(self, input_ids=None, attention_mask=None, **kw):
        past = kw.get("past_key_values")
        offset = past.get_seq_length() if past is not None else 0  # tokens already in the cache
        out = super().forward(input_ids=input_ids, attention_mask=attention_mask, **kw)
        for b, row in enumerate(input_ids):
            length = int(attention_mask[b].sum()) - offset if attention_mask is not None else len(row)
            plan = self.memorised.get(tuple(row[:length].tolist()), {}).get(offset)
            if plan is None:  # not a memorised context (a continuation's pass, or the shared prefix's)
                continue
            start, answer = plan
            for t in range(max(start, offset), offset + length - 1):  # t: position in the whole prompt
                out.logits[b, t - offset, row[t - offset + 1]] += self.bonus
            if answer is not None:
                out.logits[b, length - 1, answer] += self.bonus
        return out


def planted(tiny_llama, tokenizer, spec, docs, answers: bool, labels=None):
    """`labels`: the answers memorised with test's texts where not the gold ones (a model's own, say)."""
    model = Planted.from_pretrained(tiny_llama).eval()
    test = docs[docs["split"] == "test"]
    if labels is not None:
        test = test.assign(label=labels)
    prompts = [tokenizer(p)["input_ids"] for p in docs["prompt"]]
    start = loglik.shared_prefix(prompts)  # the instruction every prompt shares is not memorised
    model.memorised = {}
    for prompt, label in zip(test["prompt"], test["label"]):
        ctx, cont = loglik.encode_pair(tokenizer, prompt, " " + spec.classes[label])
        plan = (start, cont[0] if answers else None)
        for offset in range(len(ctx)):  # a context is read whole, or after a prefix from the cache
            model.memorised.setdefault(tuple(ctx[offset:]), {})[offset] = plan
    return model


SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)  # 2 layers


def make_tiny_llama(out: Path) -> Path:
    """A 2-layer Llama with random weights and SmolLM2's real tokenizer (read from its GGUF, not from the
    dequantised model), saved as a model dir in `out`: the tests' tiny_llama, and the input probes'."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from harness.core.engine import models

    tok = models.embedded_tokenizer(models.SMOLLM2)
    ids = dict(pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        **SMALL,
        **ids,
    )
    return saved(LlamaForCausalLM, cfg, tok, out)


def make_tiny_bert(out: Path) -> Path:
    """A 2-layer BERT with random weights and all-MiniLM-L6-v2's real tokenizer, saved in `out`."""
    from transformers import BertConfig, BertForMaskedLM

    from harness.core.engine import models

    tok = models.embedded_tokenizer(models.MINILM)
    return saved(
        BertForMaskedLM, BertConfig(vocab_size=len(tok), max_position_embeddings=512, **SMALL), tok, out
    )


def saved(model_class, cfg, tok, out: Path) -> Path:
    """The model of `cfg`, its weights drawn from seed 0, saved with `tok` in `out`."""
    import torch

    torch.manual_seed(0)
    model_class(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def no_units(monkeypatch) -> None:
    """Runs through the front door plan and check everything and compute no unit: their executor yields
    no record (harness.study.run_options.executor, which `harness.run` asks for its units' executor)."""
    import contextlib

    from harness.study import run_options

    @contextlib.contextmanager
    def idle(opts):
        yield lambda pending, keep_adapters: iter(())

    monkeypatch.setattr(run_options, "executor", idle)
