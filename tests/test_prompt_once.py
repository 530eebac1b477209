"""`hf-prompt-once` answers every request as lm-eval's `hf` does, and falls back to `hf`'s path, saying
so, where a context's cache cannot be shared."""

import logging
import subprocess
import sys

import numpy as np
import pytest
import torch
from helpers import write_plain_tasks
from lm_eval.api.instance import Instance
from lm_eval.evaluator import evaluate
from lm_eval.models.huggingface import HFLM
from transformers import LlamaForCausalLM

from harness.core.engine import models
from harness.scoring.lm_eval_registration import NAME
from harness.scoring.prompt_once import PromptOnceLM
from harness.tasks.lm_eval_spec import find_task
from harness.tasks.spec import lm_eval_tasks

TOL = 1e-4  # the bound on a log-likelihood difference in float32


def both(tiny_llama, **kwargs):
    args = {"pretrained": str(tiny_llama), "device": "cpu", "batch_size": 4} | kwargs
    return HFLM(**args), PromptOnceLM(**args)


def requests(pairs):
    return [
        Instance(request_type="loglikelihood", doc={}, arguments=pair, idx=i) for i, pair in enumerate(pairs)
    ]


def assert_same(theirs, ours):
    assert len(theirs) == len(ours)
    ll = np.array([[t[0], o[0]] for t, o in zip(theirs, ours)])
    assert np.abs(ll[:, 0] - ll[:, 1]).max() < TOL
    assert [t[1] for t in theirs] == [o[1] for o in ours]


PAIRS = [  # contexts of different lengths, shared by one-token and multi-token continuations
    ("Review: a fine, moving film.\nSentiment:", " positive"),
    ("Review: a fine, moving film.\nSentiment:", " negative"),
    ("Review: dull.\nSentiment:", " negative"),
    ("Review: dull.\nSentiment:", " positive"),
    ("Question: Who wrote Hamlet?\nAnswer type:", " human being"),
    ("Question: Who wrote Hamlet?\nAnswer type:", " numeric value"),
    ("Question: Who wrote Hamlet?\nAnswer type:", " abbreviation"),
    ("Question: How far is the moon?\nAnswer type:", " numeric value"),
    ("Question: How far is the moon?\nAnswer type:", " description and abstract concept"),
    ("Review: dull.\nSentiment:", " positive"),  # a repeated request
]


@pytest.mark.parametrize("batch", [{"batch_size": 4}, {"batch_size": "auto", "max_batch_size": 8}])
def test_one_token_and_multi_token_continuations_match_hf_in_lm_evals_order(tiny_llama, batch):
    hf, once = both(tiny_llama, **batch)
    reqs = requests(PAIRS)
    assert_same(hf.loglikelihood(reqs), once.loglikelihood(reqs))
    lengths = {len(once.tok_encode(cont)) for _, cont in PAIRS}
    assert 1 in lengths and max(lengths) >= 3


def test_continuation_passes_split_over_many_rows_still_match(tiny_llama, monkeypatch):
    from harness.core.engine import loglik

    monkeypatch.setattr(loglik, "ROWS_PER_CONTEXT", 1)  # 4 rows a pass: the cache is copied per pass
    hf, once = both(tiny_llama)
    reqs = requests(PAIRS)
    assert_same(hf.loglikelihood(reqs), once.loglikelihood(reqs))


def test_the_instruction_every_context_shares_runs_once_and_scores_as_each_context_alone(tiny_llama):
    from harness.core.engine import loglik

    tok = models.tokenizer(str(tiny_llama))
    instruction = "Classify the text as one of: negative, positive.\n\nText:"
    texts = [" a gripping, moving film", " dull", " the plot never comes together at all", " fine"]
    contexts = [tok(instruction + t)["input_ids"] for t in texts]
    conts = [[tok(" negative")["input_ids"], tok(" very positive")["input_ids"]] for _ in texts]
    model = LlamaForCausalLM.from_pretrained(tiny_llama).eval()
    read = []
    model.register_forward_pre_hook(lambda _, args, kw: read.append(kw["input_ids"].shape), with_kwargs=True)
    together = loglik.score(model, contexts, conts, batch_size=2, token_stats=True)
    prefix = loglik.shared_prefix(contexts)
    assert prefix >= 10 and read[0] == (1, prefix)  # the instruction, once
    assert all(shape[1] <= max(len(c) - prefix for c in contexts) for shape in read[1:])  # and never again
    for c, cs, s in zip(contexts, conts, together):
        [alone] = loglik.score(model, [c], [cs], token_stats=True)
        assert len(s.token_logprobs) == len(c) - 1
        for ours, theirs in ((s.token_logprobs, alone.token_logprobs), (s.token_std, alone.token_std)):
            assert np.abs(ours - theirs).max() < 1e-5
        assert np.abs(np.subtract([x[0] for x in s.choices], [x[0] for x in alone.choices])).max() < 1e-5
        assert [x[1] for x in s.choices] == [x[1] for x in alone.choices]


@pytest.fixture(scope="module")
def plain(tmp_path_factory, data_dir):
    return write_plain_tasks(tmp_path_factory.mktemp("plain"), data_dir, rows=24)


@pytest.mark.parametrize("task", ["my_questions", "my_reviews", "tapt_trec"])
def test_an_lm_eval_task_scores_the_same_samples_and_metrics(task, plain, tiny_llama, data_dir):
    """Per-doc choices (my_questions), two fixed classes (my_reviews), six multi-token ones (tapt_trec)."""
    if task == "tapt_trec":
        tasks = lm_eval_tasks([], {"data_dir": str(data_dir), "n": 12, "m": 48}).load(task)
    else:
        tasks = {task: find_task(task, [str(plain)])}
    outs = [
        evaluate(lm, tasks, log_samples=True, bootstrap_iters=0, verbosity="ERROR") for lm in both(tiny_llama)
    ]
    theirs, ours = (sorted(o["samples"][task], key=lambda s: s["doc_id"]) for o in outs)
    assert len(theirs) == len(ours) >= 12
    for t, o in zip(theirs, ours):
        assert_same([r[0] for r in t["resps"]], [r[0] for r in o["resps"]])
        assert t["acc"] == o["acc"] and t.get("acc_norm") == o.get("acc_norm")
    assert outs[0]["results"][task]["acc,none"] == outs[1]["results"][task]["acc,none"]


def test_a_peft_adapter_is_read_as_hf_reads_it(tiny_llama, tmp_path):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    config = LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(LlamaForCausalLM.from_pretrained(tiny_llama), config).save_pretrained(tmp_path / "ad")
    hf, once = both(tiny_llama, peft=str(tmp_path / "ad"))
    reqs = requests(PAIRS)
    adapted = once.loglikelihood(reqs)
    assert_same(hf.loglikelihood(reqs), adapted)
    plain_ll = PromptOnceLM(pretrained=str(tiny_llama), device="cpu").loglikelihood(reqs)
    assert max(abs(a[0] - p[0]) for a, p in zip(adapted, plain_ll)) > 100 * TOL  # the adapter is read


def test_a_4bit_base_with_an_adapter_is_scored_as_hf_scores_it(tiny_llama):
    """The grid's case: a base loaded in 4-bit NF4 (bitsandbytes) with a LoRA adapter on top, passed
    to both models as a loaded model."""
    from peft import LoraConfig, get_peft_model

    base = models.load_causal_lm(str(tiny_llama), "4bit")
    assert base.is_loaded_in_4bit
    torch.manual_seed(0)
    model = get_peft_model(
        base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    tok = models.tokenizer(str(tiny_llama))
    reqs = requests(PAIRS)
    hf = HFLM(pretrained=model, tokenizer=tok, batch_size=4).loglikelihood(reqs)
    assert_same(hf, PromptOnceLM(pretrained=model, tokenizer=tok, batch_size=4).loglikelihood(reqs))


class NoCacheLlama(LlamaForCausalLM):
    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        out.past_key_values = None
        return out


def test_a_model_without_kv_cache_falls_back_to_hf_and_says_so(tiny_llama, caplog):
    model = NoCacheLlama.from_pretrained(tiny_llama)
    tok = models.tokenizer(str(tiny_llama))
    hf = HFLM(pretrained=model, tokenizer=tok, batch_size=4)
    once = PromptOnceLM(pretrained=model, tokenizer=tok, batch_size=4)
    reqs = requests(PAIRS)
    with caplog.at_level(logging.WARNING):
        ours = once.loglikelihood(reqs)
    assert f"{NAME}: every request scored with hf's path: NoCacheLlama returned no KV cache" in caplog.text
    assert_same(hf.loglikelihood(reqs), ours)


def test_pairs_longer_than_the_window_take_hfs_left_truncation_and_say_so(tiny_llama, caplog):
    hf, once = both(tiny_llama, max_length=12)
    pairs = [*PAIRS, ("Hi:", " yes"), ("Hi:", " no")]
    reqs = requests(pairs)
    with caplog.at_level(logging.WARNING):
        ours = once.loglikelihood(reqs)
    long = sum(len(once.tok_encode(c)) + len(once.tok_encode(x)) > 13 for c, x in pairs)
    assert 0 < long < len(pairs)
    why = "longer than the window, or no continuation token"
    assert f"{NAME}: {long} of {len(pairs)} requests ({why}) scored with hf's path" in caplog.text
    assert_same(hf.loglikelihood(reqs), ours)


def test_a_continuation_the_tokenizer_merges_into_the_context_scores_as_hf_scores_it(tiny_llama):
    """lm-eval splits a pair at the context's own encoding: when the whole string merges across the
    boundary, hf scores context_enc + the rest of the whole encoding, and so does the shared cache."""
    hf, once = both(tiny_llama)
    pairs = [("Label: sport", "s news"), ("Topic: sci", "ence and tech"), ("Topic: sci", " and tech")]
    tok = once.tokenizer
    merged = [tok(c + x)["input_ids"][: len(tok(c)["input_ids"])] != tok(c)["input_ids"] for c, x in pairs]
    assert merged == [True, True, False]
    reqs = requests(pairs)
    assert_same(hf.loglikelihood(reqs), once.loglikelihood(reqs))


def test_a_prompt_learning_adapter_falls_back_to_hf_and_says_so(tiny_llama, tmp_path, caplog):
    from peft import PromptTuningConfig, get_peft_model

    config = PromptTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=3)
    get_peft_model(LlamaForCausalLM.from_pretrained(tiny_llama), config).save_pretrained(tmp_path / "pt")
    hf, once = both(tiny_llama, peft=str(tmp_path / "pt"))
    reqs = requests(PAIRS[:4])
    with caplog.at_level(logging.WARNING):
        ours = once.loglikelihood(reqs)
    assert "every request scored with hf's path: a prompt-learning adapter" in caplog.text
    assert_same(hf.loglikelihood(reqs), ours)


@pytest.mark.slow
def test_lm_eval_finds_the_model_by_name_in_a_fresh_process():
    code = "from lm_eval.api.registry import get_model as m; print(m('hf-prompt-once').__name__, m('hf'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[0] == "PromptOnceLM" and "HFLM" in done.stdout


@pytest.mark.slow
def test_the_lm_eval_command_logs_the_same_samples_as_hf(tiny_llama, data_dir, tmp_path):
    """`lm_eval --model hf-prompt-once` against `--model hf`, with --log_samples: every sample's
    log-likelihoods and acc."""
    import json

    from harness.tasks.spec import TASKS_DIR

    logged = {}
    for model in ("hf", NAME):
        out = tmp_path / model
        argv = [
            *f"-m lm_eval --model {model} --tasks tapt_trec --include_path {TASKS_DIR} --device cpu".split(),
            *["--model_args", f"pretrained={tiny_llama}", "--batch_size", "4", "--log_samples"],
            *[
                "--metadata",
                json.dumps({"data_dir": str(data_dir), "m": 24, "n": 10}),
                "--output_path",
                str(out),
            ],
        ]
        done = subprocess.run([sys.executable, *argv], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        lines = next(out.rglob("samples_tapt_trec_*.jsonl")).read_text().splitlines()
        logged[model] = sorted((json.loads(line) for line in lines), key=lambda s: s["doc_id"])
    assert len(logged["hf"]) == len(logged[NAME]) == 10
    for theirs, ours in zip(logged["hf"], logged[NAME]):  # resps as lm-eval writes them: strings
        assert_same(
            *([(float(ll), greedy == "True") for ((ll, greedy),) in s["resps"]] for s in (theirs, ours))
        )
        assert theirs["acc"] == ours["acc"]
