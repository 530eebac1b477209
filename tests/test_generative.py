"""Generative tasks through the design: a generate_until task drawn, adapted on and scored like any
task; each document's extracted answer, its correctness and its text recorded; the collapse check's
twin; lm_eval scoring a kept adapter on the same documents; test-time RL voting on extracted answers;
self-training on the base's own answers; the gold answer out of every condition but the leak."""

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import write_grid_config

from harness.cli.main import main
from harness.core.plumbing.errors import TaskError
from harness.grid.unit.unit_record import split_docs
from harness.tasks.generative import Answering, equivalent, math_answer, metric_problem
from harness.tasks.protocol import find_spec, subsample_docs
from harness.tasks.subsample import SampleSettings
from tapt.methods.test_time_rl.votes import Rewards, generated_reader

ANSWERING = Answering.of(
    {"until": ["\n", "Question:"], "max_gen_toks": 16},
    [{"name": "x", "filter": [{"function": "regex", "regex_pattern": "(-?[0-9]+)", "group_select": -1}]}],
)
USER_YAML = """task: my_sums
dataset_path: json
dataset_kwargs:
  data_files:
    train: {folder}/train.jsonl
    test: {folder}/test.jsonl
output_type: generate_until
training_split: train
test_split: test
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 8
  do_sample: false
filter_list:
  - name: last-number
    filter:
      - function: regex
        regex_pattern: "(-?[0-9]+)"
        group_select: -1
      - function: take_first
metric_list:
  - metric: {metric}
    aggregation: {aggregation}
    higher_is_better: true
"""


def user_task(folder: Path, metric: str = "exact_match", aggregation: str = "mean", name: str = "my_sums"):
    rows = [
        {"question": f"What is {a} plus {b}?", "answer": str(a + b)}
        for a in range(1, 12)
        for b in range(1, 12)
    ]
    for split, part in (("train", rows[:40]), ("test", rows[40:])):
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
    text = USER_YAML.format(folder=folder, metric=metric, aggregation=aggregation).replace("my_sums", name)
    (folder / f"{name}.yaml").write_text(text)


def grid(tmp_path, base, **extra) -> Path:
    cfg = {
        "base": str(base),
        "model_tag": "tiny",
        "tasks": ["arithmetic"],
        "m": 4,
        "n": 8,
        "subsamples": 1,
        "conditions": ["base", "extra", "test", "leak"],
        "quantize": "none",
        "eval_batch_size": 8,
        "method_settings": {"prompt-tapt": {"lr": 0.01, "batch_size": 4, "epochs": 1}},
    }
    return write_grid_config(tmp_path, tmp_path / "out", cfg | extra)


def test_a_generative_task_runs_through_the_grid_and_records_each_documents_answer(
    tmp_path, tiny_llama, capsys
):
    main(["run", "--config", str(grid(tmp_path, tiny_llama)), "--keep-adapters"])
    out = capsys.readouterr().out
    assert "boost (extra-base)" in out and "bias (test-extra)" in out and "leak (leak-extra)" in out
    tdir = tmp_path / "out" / "m4" / "n8" / "tiny" / "arithmetic"
    probs = pd.read_parquet(tdir / "units" / "0.parquet")
    assert {"answer", "gold", "generated", "length", "correct"} <= set(probs.columns)
    assert len(probs) == 4 * 8  # every test document under every condition
    assert (probs["length"] == probs["generated"].str.len()).all()
    docs = subsample_docs(find_spec("arithmetic"), SampleSettings(m=4, n=8, seed=0), 0)["test"]
    gold = dict(zip(docs["row"], docs["answer"]))
    assert all(g == gold[r] for r, g in zip(probs["row"], probs["gold"]))
    record = json.loads((tdir / "units" / "0.json").read_text())
    shares = record["answers"]["test"]
    assert 0 < shares["share"] <= 1 and set(shares) == {"most_common", "share", "empty_share", "mean_length"}
    acc = pd.read_csv(tdir / "accuracies.csv")
    assert acc["num_classes"].tolist() == [0]  # generated, not chosen
    # the leak at test's steps, and its manipulation check: each gold answer's log p after its prompt
    control = record["control"]
    assert len(set(control["steps"].values())) == 1 and control["steps"]["leak"] >= 1
    assert {c: len(v) for c, v in control["gold_log_probs"].items()} == dict.fromkeys(
        ("base", "extra", "test", "leak"), 8
    )
    assert "planted control: " in out and "manipulation check over 1 units" in out


def test_the_kept_adapter_scores_the_units_own_documents_through_lm_eval(tmp_path, tiny_llama, monkeypatch):
    """lm_eval on the adapter the grid kept, with no --metadata: its tapt.json names the draw, and
    lm-eval generates the same text and reads the same answer for every one of the unit's documents."""
    main(["run", "--config", str(grid(tmp_path, tiny_llama)), "--keep-adapters"])
    tdir = tmp_path / "out" / "m4" / "n8" / "tiny" / "arithmetic"
    adapter = tdir / "adapters" / "0_test"
    kept = json.loads((adapter / "tapt.json").read_text())
    assert (kept["m"], kept["n"], kept["seed"], kept["subsample"]) == (4, 8, 0, 0)
    from lm_eval.__main__ import cli_evaluate  # what the lm_eval command runs, here in this process

    argv = ["--model", "hf", "--model_args", f"peft={adapter}", "--tasks", "tapt_arithmetic"]
    monkeypatch.setattr(sys, "argv", ["lm_eval", *argv, "--batch_size", "8"] + [
        "--output_path", str(tmp_path / "eval"), "--log_samples"])  # fmt: skip
    cli_evaluate()
    samples = [json.loads(line) for line in next((tmp_path / "eval").rglob("samples_*.jsonl")).open()]
    probs = pd.read_parquet(tdir / "units" / "0.parquet")
    unit = probs[probs["condition"] == "test"].set_index("row")
    assert sorted(s["doc"]["row"] for s in samples) == sorted(unit.index)
    for s in samples:
        row = s["doc"]["row"]
        assert s["resps"][0][0] == unit.loc[row, "generated"], row
        assert s["filtered_resps"][0] == unit.loc[row, "answer"], row
        assert bool(s["exact_match"]) == bool(unit.loc[row, "correct"]), row


def test_test_time_rl_votes_on_the_extracted_answers_not_on_the_raw_text():
    """Three completions that write 71 three ways: one vote of 3 for '71', each rewarded; a vote over
    the raw texts would be three answers of one vote each, and reward only the first."""
    rewards = Rewards(None, None, read=generated_reader(ANSWERING, "math"))
    texts = [" 40 + 31 = 71", " the sum is 71.\nQuestion: 2 plus 2", " 71"]
    assert rewards(["p"] * 3, texts, [5, 5, 5]) == [1.0, 1.0, 1.0]
    assert rewards.votes == {5: "71"}
    task = Rewards(None, None, read=generated_reader(ANSWERING, "task"))
    assert task(["p"] * 3, texts, [5, 5, 5]) == [1.0, 1.0, 1.0]
    leak = Rewards(None, {5: "72"}, read=generated_reader(ANSWERING, "math"))
    assert leak(["p"] * 3, texts, [5, 5, 5]) == [0.0, 0.0, 0.0]  # the leak rewards the gold answer
    unreadable = Rewards(None, None, read=generated_reader(ANSWERING, "math"))
    unreadable(["p"] * 2, ["no number", " 3"], [1, 1])
    assert unreadable.unmatched == 1 and unreadable.votes == {1: "3"}


def test_ttrls_math_rule_reads_the_last_boxed_answer_else_the_last_number():
    assert math_answer(r"so $\boxed{\frac{1}{2}}$, not 3") == r"\frac{1}{2}"
    assert math_answer("1 + 2 = 3.") == "3" and math_answer("1,234 apples") == "1234"
    assert math_answer("no answer") is None


def test_test_time_rl_on_a_generative_task_records_votes_unreadable_share_rewards_and_agreement(
    tmp_path, tiny_llama, capsys
):
    config = grid(
        tmp_path,
        tiny_llama,
        method="test-time-rl",
        method_settings={"test-time-rl": {"samples": 2, "lr": 0.001}},
    )
    main(["run", "--config", str(config)])
    tdir = tmp_path / "out" / "m4" / "n8" / "tiny+test-time-rl" / "arithmetic"
    record = json.loads((tdir / "units" / "0.json").read_text())["training"]
    for cond in ("extra", "test"):
        trained = record[cond]
        assert trained["rewards"] == "majority vote" and len(trained["mean_reward"]) >= 1
        assert 0 <= trained["unmatched_share"] <= 1 and "label_accuracy" in trained
        assert all(v is None or isinstance(v, str) for v in trained["votes"].values())
    assert record["leak"]["rewards"] == "gold"
    # the premise, read before the bias: the vote, one sample and the base's greedy answer, each against the
    # gold answers of the documents the condition adapted on (the method never reads them)
    docs = subsample_docs(find_spec("arithmetic"), SampleSettings(m=4, n=8, seed=0), 0)
    gold = {str(r): str(c[0]) for r, c in zip(docs["test"]["row"], docs["test"]["choices"])}
    test = record["test"]
    assert set(test["greedy"]) == set(test["sampled"]) == set(gold) and test["premise_documents"] == 8
    right = [equivalent(a, gold[r]) for r, answers in test["sampled"].items() for a in answers]
    assert test["sample_accuracy"] == sum(right) / len(right)
    assert test["greedy_accuracy"] == np.mean([equivalent(a, gold[r]) for r, a in test["greedy"].items()])
    # a random model's vote is not right more often than its greedy answer: said, with the numbers
    main(["summarize", str(tmp_path / "out")])
    said = " ".join(capsys.readouterr().out.split())
    assert "premise (the vote against the base's own answer" in said
    assert f"maj@N {test['vote_accuracy']:.1%}, base greedy {test['greedy_accuracy']:.1%}" in said
    assert "the method's premise does not hold: its vote of the samples (maj@N) is right on 0.0% of" in said


def test_the_premise_holds_only_where_the_vote_beats_the_bases_own_answer_on_test():
    from harness.stats.summary.diagnostics import premise_fails

    holds = {
        "test": {"vote_accuracy": 0.6, "greedy_accuracy": 0.4},
        "extra": {"vote_accuracy": 0.1, "greedy_accuracy": 0.4},
    }
    assert premise_fails(holds) is None and premise_fails({}) is None
    fails = {"test": {"vote_accuracy": 0.125, "greedy_accuracy": 0.401}}
    assert "right on 12.5% of test's documents, the base's own greedy answer on 40.1%" in premise_fails(fails)
    assert premise_fails({"test": {"vote_accuracy": 0.4, "greedy_accuracy": 0.4}})  # not more often


def test_the_answer_reader_is_the_authors_phrase_rules_in_order_then_the_last_number():
    assert math_answer("so the answer is 12.") == "12"
    assert math_answer("The final answer is 7") == "7"
    assert math_answer(r"\boxed{3}") == "3" and math_answer(r"the answer is 5, so \boxed{6}") == "6"
    assert math_answer("the answer is 5 and 6 follows") == "5 and 6 follows"  # the phrase, as theirs reads
    assert math_answer(r"final answer is $8$. I hope it is correct.") == "8"
    assert math_answer("first 3 then 4") == "4"
    assert equivalent("36.0", "36") and equivalent("36.00", "36") and equivalent("1,234", "1234")
    assert not equivalent("37", "36") and not equivalent(None, "36") and not equivalent("x", "36")


def test_self_training_learns_the_bases_own_generated_answers(tmp_path, tiny_llama):
    config = grid(
        tmp_path,
        tiny_llama,
        method="self-training",
        method_settings={"self-training": {"lr": 0.01, "batch_size": 4, "epochs": 1}},
    )
    main(["run", "--config", str(config)])
    tdir = tmp_path / "out" / "m4" / "n8" / "tiny+self-training" / "arithmetic"
    record = json.loads((tdir / "units" / "0.json").read_text())["training"]
    trained = record["test"]
    assert trained["labels"] == "pseudo" and trained["of"] == 8
    assert all(isinstance(v, str) for v in trained.get("votes", {}).values())
    assert record["leak"]["labels"] == "gold"


def test_no_condition_but_the_leak_sees_a_generative_gold_answer():
    docs = subsample_docs(find_spec("arithmetic"), SampleSettings(m=4, n=8, seed=0), 0)
    for cond in ("extra", "test"):
        seen = split_docs(docs, cond)
        assert not {"answer", "choices", "label"} & set(seen.columns), cond
    assert split_docs(docs, "leak")["choices"].map(len).eq(1).all()


def test_tasks_show_and_validate_take_a_users_generate_until_yaml_and_refuse_a_corpus_metric(
    tmp_path, capsys
):
    user_task(tmp_path)
    user_task(tmp_path, metric="bleu", aggregation="bleu", name="my_bleu")
    with pytest.raises(SystemExit):  # one of the two has a problem
        main(["tasks", "validate", str(tmp_path), "--m", "4", "--n", "8"])
    out = capsys.readouterr().out
    assert "ok   " in out and "my_sums.yaml" in out
    assert "my_bleu's metric bleu is computed over the whole corpus, not per document" in out
    main(["tasks", "show", "--task", "my_sums", "--include-path", str(tmp_path), "--m", "4", "--n", "8"])
    out = capsys.readouterr().out
    assert "generative: the model writes its answer" in out and "gold answer:" in out
    with pytest.raises(SystemExit, match="computed over the whole corpus"):
        main(["tasks", "show", "--task", "my_bleu", "--include-path", str(tmp_path), "--m", "4", "--n", "8"])


def test_a_metric_is_read_per_document_only_where_it_is_one():
    assert metric_problem([{"metric": "exact_match", "aggregation": "mean"}], "t") is None
    assert "whole corpus" in metric_problem([{"metric": "chrf"}], "t")
    assert "aggregates by 'median'" in metric_problem(
        [{"metric": "exact_match", "aggregation": "median"}], "t"
    )
    assert "names no metric" in metric_problem([], "t")


def test_the_shipped_generative_task_is_not_among_a_configs_tasks_all():
    from harness.tasks.spec import all_slugs, task_files

    assert "arithmetic" in task_files() and "arithmetic" not in all_slugs()
    with pytest.raises(TaskError):
        find_spec("arithmetic").draw_rows(SampleSettings(m=4, n=2000, seed=0), 0)


def test_a_generative_models_answer_to_most_documents_is_its_collapse():
    from harness.results import collapsed

    rows = 10
    unit = pd.DataFrame(
        {
            "condition": ["test"] * rows + ["extra"] * rows,
            "row": list(range(rows)) * 2,
            "gold": [str(i) for i in range(rows)] * 2,
            "answer": ["7"] * 6 + [str(i) for i in range(6, rows)] + [str(i) for i in range(rows)],
        }
    )
    assert collapsed(unit).startswith("test=") and "extra" not in collapsed(unit)
    assert np.isfinite(float(collapsed(unit).split("=")[1]))


def test_the_screen_reads_a_generative_tasks_generated_answers_against_its_commonest_answer(
    tmp_path, tiny_llama
):
    from harness.grid.configuration.config import load_config
    from harness.study.screen import screen_task

    cfg = load_config(grid(tmp_path, tiny_llama, confirmatory=True))
    found = screen_task(cfg, "arithmetic")
    assert found.documents == 4 + 8 and 0 < found.chance < 0.5  # sums repeat, but no one answer is most
    assert found.correct == 0 and not found.entered  # a random model answers no sum


@pytest.mark.slow
def test_the_embedded_model_answers_the_offline_generative_task_and_the_design_reads_it(tmp_path):
    """SmolLM2-135M-Instruct on tapt_arithmetic: its base answers some sums (above 0), prompt TAPT and
    the leak train, and the summary prints the boost, bias and leak."""
    smol = "SmolLM2-135M-Instruct"
    settings = {"prompt-tapt": {"lr": 0.002, "epochs": 1, "batch_size": 8}}
    path = grid(tmp_path, smol, model_tag=smol, n=16, eval_batch_size=16, method_settings=settings)
    main(["run", "--config", str(path), "--threads", "1"])
    tdir = tmp_path / "out" / "m4" / "n16" / "SmolLM2-135M-Instruct" / "arithmetic"
    acc = pd.read_csv(tdir / "accuracies.csv")
    assert acc["base"].iloc[0] > 0
    record = json.loads((tdir / "units" / "0.json").read_text())
    assert record["answers"]["base"]["share"] < 0.5  # not one answer to everything


@pytest.mark.parametrize(
    "change, said",
    [
        ('regex_pattern: "(-?[0-9]+)"', "its first filter reads none of"),  # never matches: see below
        ("group_select: -1", "its first filter fails on the gold answers"),
        ('regex_pattern: "(-?[0-9]+)"', "is not a regular expression"),
        ("max_gen_toks: 8", "max_gen_toks is 0, so the model writes nothing"),
    ],
)
def test_validate_reads_the_gold_answers_through_the_filter_and_the_generation_a_run_uses(
    tmp_path, capsys, change, said, tiny_llama
):
    user_task(tmp_path)
    path = tmp_path / "my_sums.yaml"
    text = path.read_text()
    broken = {
        "its first filter reads none of": 'regex_pattern: "(zzz[0-9]+)"',
        "its first filter fails on the gold answers": "group_select: 5",
        "is not a regular expression": 'regex_pattern: "([0-9"',
        "max_gen_toks is 0, so the model writes nothing": "max_gen_toks: 0",
    }[said]
    assert change in text
    path.write_text(text.replace(change, broken))
    with pytest.raises(SystemExit):
        main(["tasks", "validate", str(path), "--m", "4", "--n", "8"])
    assert said in " ".join(capsys.readouterr().out.split())  # as written, it passes (the test above)
    config = grid(tmp_path, tiny_llama, tasks=["my_sums"], include_path=[str(tmp_path)])
    with pytest.raises(SystemExit) as refused:  # `run` checks it too, before any unit: was a traceback,
        main(["run", "--config", str(config)])  # or every answer unreadable and exit 0
    assert said in " ".join(str(refused.value).split()) and "tasks validate" in str(refused.value)
    assert not (tmp_path / "out").exists()
    with pytest.raises(SystemExit) as shown:  # and `tasks show`, which printed the task and exited 0
        main(["tasks", "show", "--task", "my_sums", "--include-path", str(tmp_path), "--m", "4", "--n", "8"])
    assert said in " ".join(str(shown.value).split())
