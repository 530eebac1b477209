"""TAPT: what reaches the training data, what the adapter changes, and the errors users see."""

import json

import pytest
import torch

from harness.core.plumbing.errors import UserError
from harness.tasks.protocol import subsample_docs
from harness.tasks.spec import TASKS_DIR, load_spec
from harness.tasks.subsample import SampleSettings
from harness.tasks.validate import build_task
from tapt.adapter import AdapterArgs
from tapt.corpus import prompt_sequences, raw_texts
from tapt.methods.raw_text.pretrain import TextArgs, collator, pretrain_text
from tapt.methods.single import train

SUB = {"subsample": 1, "m": 8, "n": 20}
AG_NEWS = ["World", "Sports", "Business", "Sci/Tech"]  # its classes in label order (TASKS.md)
AG_NEWS_PROMPT = (  # PROMPTS.md's zero-shot layout for ag_news
    "Your task is to classify a given text as one of these categories:\nWorld\nSports\nBusiness\nSci/Tech\n\n"
    "The text is a news article. Answer with its topic.\n\n### Text: {text}\n ### Answer:"
)


@pytest.fixture(scope="module")
def docs(data_dir):
    return subsample_docs(load_spec("ag_news"), SampleSettings(data_dir=str(data_dir), m=8, n=20), 1)


def test_packing_holds_8_texts_per_sequence_and_the_instruction_once(docs):
    spec = load_spec("ag_news")
    seqs = prompt_sequences(spec, docs["test"], packing=True)
    assert [s.count("### Text: ") for s in seqs] == [8, 8, 4]
    head = AG_NEWS_PROMPT.split("### Text:")[0]
    assert all(s.startswith(head) and s.count("Your task is to classify") == 1 for s in seqs)
    assert "\n\n".join(s[len(head) :] for s in seqs).split("\n\n") == [
        f"### Text: {t[:1000]}" for t in docs["test"]["text"]
    ]


def test_no_label_and_no_train_text_reaches_tapt_data(docs):
    spec = load_spec("ag_news")
    for packing in (False, True):
        seqs = prompt_sequences(spec, docs["test"], packing)
        joined = "\n".join(seqs)
        assert not any(f"### Answer: {c}" in joined for c in spec.classes)  # no answer is ever given
        assert not any(t[:1000] in joined for t in docs["train"]["text"])
        assert not any(t[:1000] in joined for t in docs["extra"]["text"])
    padded = prompt_sequences(spec, docs["test"], False)
    assert padded == [AG_NEWS_PROMPT.format(text=t[:1000]) for t in docs["test"]["text"]]


def test_the_leak_corpus_is_exactly_the_test_prompts_with_their_true_answers(docs, data_dir):
    spec = load_spec("ag_news")
    test = docs["test"]
    leak = prompt_sequences(spec, test, False, answers=True)
    # each test prompt followed by its gold continuation, as lm-eval renders and scores them
    task = build_task(TASKS_DIR / "tapt_ag_news.yaml", {"data_dir": str(data_dir), **SUB})
    scored = [
        task.doc_to_text(d) + task.config.target_delimiter + task.doc_to_choice(d)[task.doc_to_target(d)]
        for d in task.test_docs()
    ]
    assert leak == scored and leak[0].endswith("### Answer: " + AG_NEWS[test["label"][0]])
    packed = prompt_sequences(spec, test, True, answers=True)
    blocks = "\n\n".join(s.split("Answer with its topic.\n\n", 1)[1] for s in packed).split("\n\n")
    assert blocks == [
        f"### Text: {t[:1000]}\n ### Answer: {AG_NEWS[y]}" for t, y in zip(test["text"], test["label"])
    ]
    joined = "\n".join(leak)
    assert not any(t[:1000] in joined for t in docs["train"]["text"])
    assert not any(t[:1000] in joined for t in docs["extra"]["text"])
    raw = raw_texts(test, answers=True)
    assert raw == [(t, f"\n{AG_NEWS[y]}") for t, y in zip(test["text"], test["label"])]


def adapter_args(tiny_llama, data_dir, tmp_path, **kw):
    return AdapterArgs(
        **{
            "task": "ag_news",
            "split": "test",
            "base": str(tiny_llama),
            "out": tmp_path / "ad",
            "data_dir": str(data_dir),
            "batch_size": 4,
            "lr": 5e-3,
            **SUB,
            **kw,
        }
    )


def class_loglikelihoods(lm, docs):
    spec = load_spec("ag_news")
    from lm_eval.api.instance import Instance

    reqs = [
        Instance("loglikelihood", {}, (p, " " + c), i)
        for i, p in enumerate(docs["prompt"][:3])
        for c in spec.classes
    ]
    return torch.tensor([ll for ll, _ in lm.loglikelihood(reqs)])


def test_split_test_trains_on_exactly_the_test_texts_and_changes_the_model(
    tiny_llama, data_dir, tmp_path, docs
):
    from lm_eval.models.huggingface import HFLM

    rec = train(adapter_args(tiny_llama, data_dir, tmp_path))
    saved = json.loads((tmp_path / "ad" / "tapt.json").read_text())
    assert saved["rows"] == docs["test"]["row"].tolist() and saved["sequences"] == 20
    assert not set(saved["rows"]) & set(docs["train"]["row"])
    assert saved["quantized_4bit"] and rec["steps"] == 5 and len(saved["losses"]) == 5
    assert (tmp_path / "ad" / "adapter_config.json").is_file()
    base = class_loglikelihoods(HFLM(pretrained=str(tiny_llama), device="cpu"), docs["test"])
    tuned = class_loglikelihoods(
        HFLM(pretrained=str(tiny_llama), peft=str(tmp_path / "ad"), device="cpu"), docs["test"]
    )
    assert (base - tuned).abs().max() > 1e-3


def test_same_seed_same_losses(tiny_llama, data_dir, tmp_path):
    a = train(adapter_args(tiny_llama, data_dir, tmp_path, quantize="none", n=8))
    b = train(adapter_args(tiny_llama, data_dir, tmp_path, quantize="none", n=8, overwrite=True))
    assert a["losses"] == b["losses"]


@pytest.mark.slow
def test_bf16_is_opt_in_trains_under_autocast_and_the_adapted_model_is_scored_in_its_own_precision(
    tiny_llama, data_dir, tmp_path
):
    from harness.core.engine import models
    from tapt import adapter

    ids = torch.tensor([[1, 5, 9, 13, 17]])
    losses = {}
    for bf16 in (False, True):
        args = adapter_args(tiny_llama, data_dir, tmp_path, quantize="none", n=8, bf16=bf16)
        spec, split = args.sample.docs()
        model = models.load_causal_lm(args.model.base, "none", False)
        run = adapter.prepare(
            spec,
            split,
            args.adapter,
            False,
            0,
            model,
            models.tokenizer(args.model.base),
            tmp_path / str(bf16),
        )
        adapted = adapter.train(run)
        losses[bf16] = run.steps.losses
        adapted.eval()
        with torch.inference_mode():  # as scored against: the class's own forward, in float32
            plain = type(adapted).forward(adapted, input_ids=ids).logits
            assert torch.equal(adapted(input_ids=ids).logits, plain)
    assert losses[True] != losses[False]  # autocast was on while training


def test_masking_rate_is_15_percent(tiny_bert):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    torch.manual_seed(0)
    batch = collator(tok, decoder=False)([{"input_ids": tok("word " * 200)["input_ids"]} for _ in range(50)])
    rate = (batch["labels"] != -100).float().mean().item()
    assert abs(rate - 0.15) < 0.01


@pytest.mark.parametrize("which", ["tiny_bert", "tiny_llama"])
def test_pretrain_text_saves_a_model_dir(which, request, data_dir, tmp_path):
    base = request.getfixturevalue(which)
    rec = pretrain_text(
        TextArgs(
            task="ag_news",
            split="extra",
            base=str(base),
            out=tmp_path / "m",
            data_dir=str(data_dir),
            pretrain_batch_size=8,
            **SUB,
        )
    )
    assert rec["objective"] == ("mlm" if which == "tiny_bert" else "clm")
    assert rec["epochs"] == (2.0 if which == "tiny_bert" else 1.0) and rec["steps"] == (
        6 if which == "tiny_bert" else 3
    )
    assert (tmp_path / "m" / "model.safetensors").is_file() and (tmp_path / "m" / "tapt.json").is_file()


@pytest.mark.xdist_group("lm_eval_index")  # lm-eval's own task index: built once, in one worker
@pytest.mark.parametrize(
    "change, message",
    [
        ({"task": "no_such_task"}, "unknown task 'no_such_task'"),
        ({"split": "train"}, "split must be one of ('extra', 'test')"),
        ({"base": "/nowhere/model"}, "--base '/nowhere/model' not found"),
        ({"lr": 1e30, "quantize": "none"}, "training loss became"),
    ],
)
def test_bad_input(tiny_llama, data_dir, tmp_path, change, message):
    with pytest.raises(UserError, match=message.replace("(", "\\(").replace(")", "\\)")):
        train(adapter_args(tiny_llama, data_dir, tmp_path, **change))


def test_existing_output_is_kept_unless_overwrite(tiny_llama, data_dir, tmp_path):
    (tmp_path / "ad").mkdir()
    (tmp_path / "ad" / "keep.txt").write_text("old")
    with pytest.raises(UserError, match="did not write .*name another --out, or remove it yourself") as said:
        train(adapter_args(tiny_llama, data_dir, tmp_path))  # a user's folder: --overwrite is not offered
    assert "pass --overwrite" not in str(said.value)  # it would be refused: the advice looped
    (tmp_path / "ad" / "tapt.json").write_text("{}")  # tapt-bench's own output: --overwrite replaces it
    with pytest.raises(UserError, match="exists; pass --overwrite"):
        train(adapter_args(tiny_llama, data_dir, tmp_path))
    assert (tmp_path / "ad" / "keep.txt").read_text() == "old"


def test_an_mlm_batch_always_has_a_masked_token(tiny_bert):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    collate = collator(tok, decoder=False)
    torch.manual_seed(0)
    batches = [collate([{"input_ids": tok("a b")["input_ids"]}]) for _ in range(200)]  # 2 maskable tokens
    assert all((b["labels"] != -100).sum() >= 1 for b in batches)
    forced = [
        b
        for b in batches
        if (b["labels"] != -100).sum() == 1 and (b["input_ids"] == tok.mask_token_id).sum() == 1
    ]
    assert len(forced) > 100  # P(no token masked of 2) = 0.85^2: the guard does most of the masking here


def test_train_method_raw_text_pretrains_the_backbone(tiny_bert, data_dir, tmp_path, capsys):
    """`train --method raw-text` is the classifier flow's TAPT from the one command that trains: the
    backbone's weights move and a model dir is written; the older name `pretrain-text` is gone."""
    from safetensors.torch import load_file

    from harness.cli.main import main

    flags = ["--task", "ag_news", "--split", "extra", "--base", str(tiny_bert), "--data-dir", str(data_dir)]
    flags += [f"--{k}={v}" for k, v in SUB.items()] + ["--pretrain-batch-size", "8"]
    main(["train", "--method", "raw-text", "--out", str(tmp_path / "a"), *flags])
    said = capsys.readouterr()
    assert (
        "objective mlm" in said.out and "lm_eval" not in said.out
    )  # a backbone: the classifier flow scores it
    record = json.loads((tmp_path / "a" / "tapt.json").read_text())
    assert (record["kind"], record["steps"], record["pretrain_batch_size"]) == ("text", 6, 8)
    before, after = (
        load_file(tiny_bert / "model.safetensors"),
        load_file(tmp_path / "a" / "model.safetensors"),
    )
    moved = [k for k in after if k in before and not torch.equal(before[k], after[k])]
    assert any("encoder.layer" in k for k in moved), "the backbone did not move"
    with pytest.raises(SystemExit):
        main(["pretrain-text", "--out", str(tmp_path / "b"), *flags])
    assert "invalid choice: 'pretrain-text'" in capsys.readouterr().err and not (tmp_path / "b").exists()
