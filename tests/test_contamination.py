"""The sharded exchangeability test: statistic, shards, sliding window, batching, errors."""

import json
import math

import pytest

from contamination.exchangeability import pvalue_from_log, shard_sizes, split_shards, t_statistic
from contamination.exchangeability_run import ContaminationArgs, examples, run, sharded_test
from contamination.logprobs import logprob_one, logprobs_batched, windows
from harness.cli.main import main
from harness.core.engine.models import check_adapter_base
from harness.core.plumbing.errors import UserError
from harness.tasks.protocol import subsample_docs
from harness.tasks.spec import load_spec
from harness.tasks.subsample import SampleSettings


def test_statistic_by_hand():
    # d = [1, 2, 3]: mean 2, std (ddof 0) sqrt(2/3), t = 2 / sqrt(2/3) * sqrt(3) = sqrt(18);
    # Student's t with 2 df has F(t) = 1/2 + t / (2 sqrt(t^2 + 2)).
    t, p = t_statistic([1.0, 3.0, 5.0], [[0.0, 0.0], [1.0, 1.0], [1.0, 3.0]])
    assert t == pytest.approx(math.sqrt(18))
    assert p == pytest.approx(0.5 - math.sqrt(18) / (2 * math.sqrt(20)))


@pytest.mark.slow  # the study's logs are in ../shared, beside the checkout
@pytest.mark.parametrize("name", ["test_split_adapter", "extra_split_adapter"])
def test_study_logs_reproduce_their_pval(reference_dir, name, capsys):
    path = reference_dir / "contamination" / f"{name}.log.json"
    main(["contamination", "pvalue", str(path), "--json"])
    assert abs(json.loads(capsys.readouterr().out)["pval"] - json.loads(path.read_text())["pval"]) < 1e-6


def test_shard_sizes():
    assert shard_sizes(10, 3) == [4, 3, 3]
    assert shard_sizes(500, 256) == [2] * 244 + [1] * 12
    assert split_shards(list("abcdefg"), 3) == [["a", "b", "c"], ["d", "e"], ["f", "g"]]


def test_windows_cover_every_token_once():
    for length, c, s in [(10, 4, 2), (10, 4, 4), (3, 8, 4), (100, 16, 5)]:
        targets = [t for start, end, first in windows(length, c, s) for t in range(first, end)]
        assert targets == list(range(1, length))
        assert all(end - start <= c for start, end, _ in windows(length, c, s))


@pytest.fixture(scope="module")
def tiny(tiny_llama):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(tiny_llama).eval(), AutoTokenizer.from_pretrained(tiny_llama)


def test_sliding_window_equals_full_context_when_it_fits(tiny):
    model, tok = tiny
    ids = tok("one two three four five six seven eight nine ten " * 3)["input_ids"]
    full = logprob_one(model, ids, context=len(ids), stride=len(ids))
    assert logprob_one(model, ids, context=len(ids) + 10, stride=4) == pytest.approx(full, abs=1e-4)
    assert logprobs_batched(model, [ids], context=len(ids), stride=3, batch_size=4)[0] == pytest.approx(
        full, abs=1e-4
    )
    assert logprob_one(model, ids, context=8, stride=4) != pytest.approx(
        full, abs=1e-3
    )  # windows do cut context


def test_batched_equals_one_sequence_per_pass(tiny):
    model, tok = tiny
    seqs = [
        tok(t)["input_ids"]
        for t in ["a short one", "a much longer sequence " * 9, "a short one", "mid size text " * 4]
    ]
    batched = logprobs_batched(model, seqs, context=32, stride=16, batch_size=3)
    assert batched == pytest.approx([logprob_one(model, s, 32, 16) for s in seqs], abs=1e-3)
    assert batched[0] == batched[2]


def test_examples_in_both_formats(data_dir):
    from harness.tasks.spec import TASKS_DIR
    from harness.tasks.validate import build_task

    spec = load_spec("ag_news")
    docs = subsample_docs(spec, SampleSettings(data_dir=str(data_dir), n=5, m=8), 0)["test"]
    labeled = examples(spec, docs, "labeled")
    classes = ["World", "Sports", "Business", "Sci/Tech"]
    assert labeled == [
        f"### Text: {t[:1000]}\n ### Answer: {classes[y]}" for t, y in zip(docs["text"], docs["label"])
    ]
    # text-only: the unlabeled prompts TAPT trains on, which are what lm-eval shows the model
    task = build_task(TASKS_DIR / "tapt_ag_news.yaml", {"data_dir": str(data_dir), "n": 5, "m": 8})
    assert examples(spec, docs, "text-only") == [task.doc_to_text(d) for d in task.test_docs()]


def test_result_has_shards_and_permutations(tiny):
    model, tok = tiny
    out = sharded_test(
        model,
        tok,
        [f"example number {i}" for i in range(9)],
        shards=3,
        permutations=4,
        seed=0,
        batch_size=4,
        context_len=64,
        stride=32,
    )
    assert out["num_shards"] == 3 and len(out["canonical_logprobs"]) == 3
    assert [len(s) for s in out["shuffled_logprobs"]] == [4, 4, 4]
    canonical = "\n".join(f"example number {i}" for i in range(3))  # shard 0 in its canonical order
    assert out["canonical_logprobs"][0] == pytest.approx(
        logprob_one(model, tok(canonical)["input_ids"], 64, 32), abs=1e-3
    )
    assert out["shuffled_logprobs"][0] != pytest.approx([out["canonical_logprobs"][0]] * 4, abs=1e-3)


def test_bad_input(tiny_llama, data_dir, tmp_path):
    args = {"base": str(tiny_llama), "task": "ag_news", "data_dir": str(data_dir), "n": 5, "m": 8}
    with pytest.raises(UserError, match="5 examples cannot fill 8 shards"):
        run(ContaminationArgs(**args, shards=8))
    with pytest.raises(UserError, match="permutations must be at least 1, got 0"):  # the settings' own check
        run(ContaminationArgs(**args, shards=2, permutations=0))
    (tmp_path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "org/other-model"}))
    with pytest.raises(UserError, match="was trained on 'org/other-model', not on"):
        check_adapter_base(str(tiny_llama), str(tmp_path))
    with pytest.raises(UserError, match=r"missing key\(s\) \['shuffled_logprobs'\]"):
        pvalue_from_log({"canonical_logprobs": [1, 2]}, "x.json")
    (tmp_path / "log.json").write_text(json.dumps({"pval": 0.5}))
    with pytest.raises(SystemExit, match="log.json: missing key"):
        main(["contamination", "pvalue", str(tmp_path / "log.json")])


def test_chat_prompts_default_to_the_bases_template_as_train_and_exposure_do():
    """`--prompt-format chat` without `--chat-model` renders through the base's template, as the flag's
    help says; it was refused here as unset, where `train` and `exposure` took the base."""
    from contamination.exposure_run import ExposureArgs
    from tapt.methods.single import TrainArgs

    kw = {"task": "ag_news", "prompt_format": "chat", "base": "my/base"}
    assert ContaminationArgs(**kw).sample.chat_model == "my/base"
    assert ExposureArgs(**kw).sample.chat_model == TrainArgs(**kw, out="x").sample.chat_model == "my/base"
    assert ContaminationArgs(**kw, chat_model="other").sample.chat_model == "other"
