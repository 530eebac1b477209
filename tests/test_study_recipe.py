"""The study's own recipe where a config asks for it: its scoring rule (CAPPr: a class's mean token
log-prob), its sequence lengths, and its QLoRA optimiser with gradient checkpointing."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import one_unit

from harness.tasks.protocol import find_spec, subsample_docs
from harness.tasks.subsample import SampleSettings


def class_logprobs(model, tokenizer, prompt: str, classes: list[str]) -> list[np.ndarray]:
    """Each class's token log-probs after `prompt`, from the model directly (no lm-eval)."""
    out = []
    for name in classes:
        context = tokenizer(prompt)["input_ids"]
        whole = tokenizer(prompt + " " + name)["input_ids"]
        assert whole[: len(context)] == context
        with torch.no_grad():
            logits = model(torch.tensor([whole])).logits[0].float().log_softmax(-1)
        out.append(np.array([logits[i - 1, whole[i]].item() for i in range(len(context), len(whole))]))
    return out


def test_the_study_rule_is_the_mean_of_a_class_token_log_probs(tiny_llama, data_dir):
    """On ag_news ('Sci/Tech' is several tokens, 'World' one), each doc's mean-token prediction is the
    class with the largest mean log-prob computed here from the model alone, lm-eval's acc the largest
    sum; the two rules disagree on some doc of the tiny model."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from harness.scoring.zero_shot import lm_eval_task, score, scorer

    config = AutoConfig.from_pretrained(tiny_llama)
    config.initializer_range = 0.002  # next-token log-probs all near -log(vocab)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    tok = AutoTokenizer.from_pretrained(tiny_llama)
    # Sci/Tech's tokens made likelier: each near -4, so its mean is the largest and its sum (3 tokens) not
    bias = torch.zeros(config.vocab_size)
    bias[tok(" Sci/Tech", add_special_tokens=False)["input_ids"]] = 6.8
    model.lm_head.register_forward_hook(lambda module, args, out: out + bias)
    spec = find_spec("ag_news")
    metadata = {"data_dir": str(data_dir), "n": 16}
    test = subsample_docs(spec, SampleSettings(data_dir=str(data_dir), n=16), 0)["test"]
    task = lm_eval_task(spec, metadata, [], test)
    by_mean = score(scorer(model, tok, 8), task, "mean_token")
    by_sum = score(scorer(model, tok, 8), task, "acc")
    assert by_mean["correct"].tolist() == by_mean["correct_mean_token"].tolist()
    assert by_sum["correct"].tolist() == by_sum["correct_acc"].tolist() == by_mean["correct_acc"].tolist()
    lengths = {len(tok(" " + c, add_special_tokens=False)["input_ids"]) for c in spec.classes}
    assert len(lengths) > 1, "the test needs classes of different token counts"
    for prompt, label, mean_right, sum_right, probs in zip(
        test["prompt"], test["label"], by_mean["correct"], by_sum["correct"], by_mean["probs"]
    ):
        lp = class_logprobs(model, tok, prompt, list(spec.classes))
        means = np.array([x.mean() for x in lp])
        assert mean_right == (int(means.argmax()) == label)
        assert sum_right == (int(np.array([x.sum() for x in lp]).argmax()) == label)
        assert np.allclose(probs, np.exp(means - means.max()) / np.exp(means - means.max()).sum(), atol=1e-4)
    predicted = [by["probs"].map(np.argmax).to_numpy() for by in (by_mean, by_sum)]
    assert (predicted[0] != predicted[1]).any()


def test_a_unit_records_both_rules_and_reads_the_one_its_config_names(tmp_path, tiny_llama, data_dir):
    unit = one_unit(tmp_path, tiny_llama, data_dir, "prompt-tapt", {}, accuracy="mean_token")
    rules = unit["accuracy_by_rule"]
    assert set(rules) == {"acc", "mean_token"}
    assert set(rules["acc"]) == {"base", "extra", "test", "leak", "stream"}
    assert unit["settings"]["accuracy"] == "mean_token"
    assert {c: unit[c] for c in rules["mean_token"]} == rules["mean_token"]


@pytest.mark.slow
def test_the_study_qlora_optimiser_and_checkpointing_train_a_4bit_unit_that_gives_the_base_back(
    tmp_path, tiny_llama, data_dir
):
    """paged_adamw_8bit and gradient checkpointing on a 4-bit base: every LoRA layer moves, the base comes
    back unchanged for the next condition (the run checks it), and the record says what ran."""
    study = {"optim": "paged_adamw_8bit", "gradient_checkpointing": True}
    four = ["base", "extra", "test", "leak"]
    unit = one_unit(
        tmp_path, tiny_llama, data_dir, "prompt-tapt", {}, quantize="4bit", conditions=four, **study
    )
    assert "not_adapted" not in unit
    assert {k: unit["settings"][k] for k in study} == study
    for cond in ("extra", "test", "leak"):
        training = unit["training"][cond]
        assert {k: training[k] for k in study} == study
        assert training["moved"]["norm"] > 0 and training["moved"]["unmoved_layers"] == 0, cond


def test_a_chat_prompt_is_the_studys_turns_through_the_template_with_the_answer_left_open(
    tiny_llama, data_dir
):
    from harness.tasks import prompts

    spec = find_spec("ag_news")
    sample = SampleSettings(data_dir=str(data_dir), n=4, prompt_format="chat", chat_model=str(tiny_llama))
    docs = subsample_docs(spec, sample, 0)["test"]
    plain = subsample_docs(spec, SampleSettings(data_dir=str(data_dir), n=4), 0)["test"]
    assert docs["text"].tolist() == plain["text"].tolist()
    for text, prompt in zip(docs["text"], docs["prompt"]):
        assert prompt == (
            f"<|im_start|>system\n{prompts.instruction(spec)}<|im_end|>\n"
            f"<|im_start|>user\n### Text: {text[: prompts.MAX_TEXT_CHARS]}\n<|im_end|>\n"
            "<|im_start|>assistant\n ### Answer:"
        )


def test_a_tokenizer_without_a_chat_template_gets_the_plain_prompt_as_the_study_joined_it(
    tmp_path, tiny_llama, data_dir
):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_llama)
    tok.chat_template = None
    tok.save_pretrained(tmp_path / "no_template")
    (tmp_path / "no_template" / "chat_template.jinja").unlink(missing_ok=True)
    spec = find_spec("ag_news")
    chat = SampleSettings(
        data_dir=str(data_dir), n=4, prompt_format="chat", chat_model=str(tmp_path / "no_template")
    )
    plain = SampleSettings(data_dir=str(data_dir), n=4)
    assert (
        subsample_docs(spec, chat, 0)["test"]["prompt"].tolist()
        == subsample_docs(spec, plain, 0)["test"]["prompt"].tolist()
    )


def test_lm_eval_scores_the_chat_prompts_the_grid_trains_on(tiny_llama, data_dir):
    """The design's lm_eval line with prompt_format chat in --metadata scores the same chat prompts as the
    subsample's docs, the template taken from the scored model (model_args' pretrained)."""
    from lm_eval import simple_evaluate

    metadata = {
        "data_dir": str(data_dir),
        "n": 4,
        "prompt_format": "chat",
    }  # model_args join it, as on the CLI
    out = simple_evaluate(
        model="hf",
        model_args=f"pretrained={tiny_llama}",
        device="cpu",
        tasks=["tapt_ag_news"],
        metadata=metadata,
        log_samples=True,
        verbosity="ERROR",
    )
    scored = [s["arguments"][0][0] for s in sorted(out["samples"]["tapt_ag_news"], key=lambda s: s["doc_id"])]
    sample = SampleSettings(data_dir=str(data_dir), n=4, prompt_format="chat", chat_model=str(tiny_llama))
    assert scored == subsample_docs(spec := find_spec("ag_news"), sample, 0)["test"]["prompt"].tolist()
    assert all(p.startswith("<|im_start|>system\n") for p in scored) and spec.slug == "ag_news"


def test_a_chat_unit_trains_and_scores_chat_prompts_and_records_it(tmp_path, tiny_llama, data_dir):
    unit = one_unit(
        tmp_path,
        tiny_llama,
        data_dir,
        "prompt-tapt",
        {},
        prompt_format="chat",
        conditions=["base", "extra", "test"],
    )
    assert unit["settings"]["prompt_format"] == "chat" and "chat_model" not in unit["settings"]
    (tmp_path / "plain").mkdir()
    plain = one_unit(
        tmp_path / "plain", tiny_llama, data_dir, "prompt-tapt", {}, conditions=["base", "extra", "test"]
    )
    assert "prompt_format" not in plain["settings"] and plain["settings_hash"] != unit["settings_hash"]
    assert unit["training"]["test"]["tokens"] > plain["training"]["test"]["tokens"]  # the template's turns
