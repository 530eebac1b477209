"""An adapter is scored through lm-eval on the prompts it was trained on: the hook reads the prompt format
from the record tapt-bench wrote beside it, and refuses --metadata that contradicts it."""

import json

import numpy as np
import pytest

from harness.core.plumbing.errors import UserError
from harness.tasks.protocol import SplitSettings, find_spec, subsample_docs
from tasks_yaml.utils import FACTS, load_docs


def chat_adapter(folder, base):
    from peft import LoraConfig

    LoraConfig(base_model_name_or_path=str(base), task_type="CAUSAL_LM").save_pretrained(folder)
    draw = {"task": "ag_news", "m": 4, "n": 6, "seed": 0, "subsample": 0}  # a whole record names its draw
    (folder / "tapt.json").write_text(json.dumps({"kind": "adapter", "prompt_format": "chat", **draw}))
    return folder


def test_a_chat_adapter_is_scored_on_the_chat_prompts_the_grid_trains_and_scores(
    tmp_path, tiny_llama, data_dir
):
    spec = find_spec("ag_news")
    facts = {k: getattr(spec, k) for k in FACTS if hasattr(spec, k)}
    metadata = {"data_dir": str(data_dir), "m": 4, "n": 6}
    peft = chat_adapter(tmp_path / "adapter", tiny_llama)
    scored = load_docs(**facts, **metadata, peft=str(peft))["test"]["prompt"]
    grid = SplitSettings(task="ag_news", prompt_format="chat", chat_model=str(tiny_llama), **metadata)
    plain = SplitSettings(task="ag_news", **metadata)
    assert scored == list(subsample_docs(spec, grid, 0)["test"]["prompt"])
    assert scored != list(subsample_docs(spec, plain, 0)["test"]["prompt"])  # the hook's old default
    with pytest.raises(
        UserError, match="--metadata sets prompt_format 'plain' \\(the adapter's: 'chat'\\), but the adapter"
    ):
        load_docs(**facts, **metadata, prompt_format="plain", peft=str(peft))


def adapter_of(folder, **draw):
    folder.mkdir()
    (folder / "tapt.json").write_text(json.dumps({"kind": "adapter", "prompt_format": "plain", **draw}))
    return str(folder)


def test_lm_eval_scores_the_documents_of_the_draw_the_adapter_was_trained_on(tmp_path, data_dir):
    """An adapter trained at m 4, n 8 on ag_news's subsample 1: lm-eval's --metadata without m, n or
    subsample scores that draw's test documents, not the default m 100's; a contradiction is refused."""
    spec = find_spec("ag_news")
    facts = {k: getattr(spec, k) for k in FACTS if hasattr(spec, k)}
    peft = adapter_of(tmp_path / "a", task="ag_news", m=4, n=8, seed=0, subsample=1)
    scored = load_docs(**facts, data_dir=str(data_dir), peft=peft)["test"]
    trained = subsample_docs(spec, SplitSettings(task="ag_news", m=4, n=8, data_dir=str(data_dir)), 1)
    assert list(scored["row"]) == list(trained["test"]["row"]) and len(scored) == 8
    with pytest.raises(UserError, match=r"sets n 100 \(the adapter's: 8\), but the adapter .* drop n"):
        load_docs(**facts, data_dir=str(data_dir), n=100, peft=peft)
    with pytest.raises(UserError, match="unknown --metadata key 'nn'; did you mean 'n'"):
        load_docs(**facts, data_dir=str(data_dir), nn=8, peft=peft)
    other = adapter_of(tmp_path / "b", task="trec", m=4, n=8, seed=0, subsample=0)
    with pytest.raises(UserError, match="was trained on task 'trec'.*--tasks tapt_trec"):
        load_docs(**facts, data_dir=str(data_dir), peft=other)


def test_lm_evals_table_gives_the_study_rule_and_acc_as_the_grid_scores_them():
    """Each choice's token count makes the study's rule from the summed log-likelihoods lm-eval passes."""
    from tasks_yaml.utils import process_results

    doc = {"label": 1, "choice_tokens": [1, 4]}
    results = [(-2.0, False), (-6.0, False)]  # sums: choice 0; means -2.0 against -1.5: choice 1
    assert process_results(doc, results) == {"acc": 0.0, "mean_token": 1.0}
    assert process_results({"label": 0}, results) == {"acc": 1.0}  # no tokenizer: lm-eval's acc alone


@pytest.mark.slow
def test_a_chat_adapter_the_grid_kept_scores_through_lm_eval_as_the_grid_scored_it(
    tmp_path, tiny_llama, data_dir
):
    """The design's line, `lm_eval --model hf --model_args peft=ADAPTER --tasks tapt_X --metadata ...`, on
    a chat adapter a grid kept: lm-eval's mean_token is the unit's test accuracy (the study's rule), its
    acc the unit's lm-eval acc, on the same documents and prompts."""
    import subprocess
    import sys
    from pathlib import Path

    import pandas as pd
    from helpers import TINY_GRID_DIR, tiny_grid_config

    from harness.cli.main import main

    out = tmp_path / "out"
    config = tiny_grid_config(
        tmp_path,
        tiny_llama,
        data_dir,
        out,
        subsamples=1,
        conditions=["base", "extra", "test"],
        exposure=False,
        prompt_format="chat",
        accuracy="mean_token",
    )
    main(["run", "--config", str(config), "--keep-adapters"])
    tdir = out / TINY_GRID_DIR
    adapter = tdir / "adapters" / "0_test"
    assert json.loads((adapter / "tapt.json").read_text())["prompt_format"] == "chat"
    probs = pd.read_parquet(tdir / "units" / "0.parquet")
    test = probs[probs["condition"] == "test"]
    metadata = json.dumps({"data_dir": str(data_dir)})  # the kept adapter's tapt.json names its draw
    lm_eval = str(Path(sys.executable).parent / "lm_eval")
    done = subprocess.run(
        [lm_eval, "--model", "hf", "--model_args", f"peft={adapter}", "--tasks", "tapt_ag_news"]
        + ["--metadata", metadata, "--output_path", str(tmp_path / "eval"), "--log_samples"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "mean_token" in done.stdout  # lm_eval's table prints the study's rule beside acc
    scored = json.loads(next((tmp_path / "eval").rglob("results_*.json")).read_text())["results"][
        "tapt_ag_news"
    ]
    assert scored["mean_token,none"] == pytest.approx(test["correct_mean_token"].mean())
    assert scored["acc,none"] == pytest.approx(test["correct_acc"].mean())
    samples = [
        json.loads(line) for line in next((tmp_path / "eval").rglob("samples_tapt_ag_news_*.jsonl")).open()
    ]
    grid = test.set_index("row")["probs"]
    assert sorted(s["doc"]["row"] for s in samples) == sorted(grid.index)
    for (
        s
    ) in samples:  # each document's class probabilities by the study's rule, from lm-eval's log-likelihoods
        mean = np.array([float(r[0]) for r in s["filtered_resps"]]) / np.array(s["doc"]["choice_tokens"])
        p = np.exp(mean - mean.max())
        assert p / p.sum() == pytest.approx(np.array(grid[s["doc"]["row"]]), abs=1e-4), s["doc"]["row"]


def test_a_misspelt_task_yaml_key_is_refused_under_lm_eval_as_tapt_bench_refuses_it(data_dir):
    spec = find_spec("ag_news")
    facts = {k: getattr(spec, k) for k in FACTS if hasattr(spec, k)}
    facts["text_feild"] = facts.pop("text_field")
    with pytest.raises(
        UserError, match="unknown dataset_kwargs key 'text_feild' in its YAML; did you mean 'text_field'"
    ):
        load_docs(**facts, data_dir=str(data_dir))
