"""The design on plain lm-eval multiple-choice tasks: pool, draws, TAPT corpus, scoring through lm-eval
on exactly the test docs, the classifier-flow refusal, and writing a new task file."""

import json
import re
import shutil

import numpy as np
import pytest
from helpers import write_grid_config, write_plain_tasks

import harness
from harness.cli.main import main
from harness.core.plumbing.errors import SettingsError, TaskError
from harness.grid.configuration.config import load_config
from harness.tasks.lm_eval_spec import LmEvalSpec, folder_name
from harness.tasks.protocol import find_spec, subsample_docs
from harness.tasks.spec import TASKS_DIR, load_task_config
from harness.tasks.subsample import SampleSettings
from tapt.corpus import prompt_sequences

N = 12
# lm-eval's own task index (seconds to build) is built once, in the one worker that runs this file
pytestmark = pytest.mark.xdist_group("lm_eval_index")


@pytest.fixture(scope="module")
def plain(tmp_path_factory, data_dir):
    return write_plain_tasks(tmp_path_factory.mktemp("plain_tasks"), data_dir)


def docs_of(plain, name, k=0, n=N, m=8):
    spec = find_spec(name, [str(plain)])
    return spec, subsample_docs(spec, SampleSettings(m=m, n=n, include_path=[str(plain)]), k)


def test_the_pool_is_the_tasks_eval_docs_and_the_draws_are_disjoint_and_stratified(plain):
    spec, docs = docs_of(plain, "my_reviews")
    assert isinstance(spec, LmEvalSpec) and spec.classes == ("negative", "positive")
    assert len(spec.pool()) == 240 and spec.training_pool() is None and len(docs["train"]) == 0
    reviews = [json.loads(line) for line in (plain / "reviews.jsonl").read_text().splitlines()]
    assert [r["text"] for r in reviews] == [
        spec.task.doc_to_text(d).removeprefix("Review: ").removesuffix("\nSentiment:")
        for d in spec.task.eval_docs
    ]  # the pool is the file's rows, in order
    gold = np.array([["negative", "positive"].index(r["sentiment"]) for r in reviews])
    for k in range(3):
        _, docs = docs_of(plain, "my_reviews", k)
        extra, test = (docs[s]["row"].to_numpy() for s in ("extra", "test"))
        assert len(extra) == len(test) == N and not set(extra) & set(test)
        assert (docs["test"]["label"].to_numpy() == gold[test]).all()  # the string gold as its index
        counts = [np.bincount(gold[r], minlength=2).tolist() for r in (extra, test)]
        assert counts[0] == counts[1] == [N // 2, N // 2]  # stratified by the gold index, as the pool (1:1)
    _, other = docs_of(plain, "my_reviews", 1)
    assert set(other["test"]["row"]) != set(docs_of(plain, "my_reviews", 0)[1]["test"]["row"])


def test_per_doc_choices_draw_uniformly_with_train_from_the_training_split(plain):
    spec, docs = docs_of(plain, "my_questions")
    assert spec.classes is None and len(docs["train"]) == 8
    assert not set(docs["extra"]["row"]) & set(docs["test"]["row"])
    assert {len(c) for c in docs["test"]["choices"]} == {3} and len(
        {tuple(c) for c in docs["test"]["choices"]}
    ) > 1


def test_the_tapt_corpus_is_the_tasks_rendered_prompt_and_the_leak_adds_the_gold_choice(plain):
    spec, docs = docs_of(plain, "my_questions")
    test = docs["test"]
    eval_docs = spec.task.eval_docs
    rendered = [spec.task.fewshot_context(eval_docs[int(r)], num_fewshot=0) for r in test["row"]]
    assert prompt_sequences(spec, test, packing=False) == rendered
    assert all(p.startswith("Name the type of thing") and "Question: " in p for p in rendered)
    golds = [
        spec.task.doc_to_choice(eval_docs[int(r)])[spec.task.doc_to_target(eval_docs[int(r)])]
        for r in test["row"]
    ]
    leak = prompt_sequences(spec, test, packing=False, answers=True)
    assert leak == [p + " " + g for p, g in zip(rendered, golds)]
    packed = prompt_sequences(spec, test, packing=True)
    assert len(packed) == 2 and all(s.count("Name the type of thing") == 1 for s in packed)


def test_a_grid_scores_exactly_the_test_docs_as_lm_eval_does(plain, tiny_llama, tmp_path):
    from lm_eval.evaluator import evaluate
    from lm_eval.models.huggingface import HFLM

    out = tmp_path / "grid"
    cfg = {
        "base": str(tiny_llama),
        "model_tag": "tiny",
        "tasks": ["my_questions"],
        "include_path": [str(plain)],
        "m": 8,
        "n": 6,
        "subsamples": 1,
        "conditions": ["base", "extra", "test", "leak"],
        "quantize": "none",
        "method_settings": {"prompt-tapt": {"batch_size": 4}},
    }
    harness.run(write_grid_config(tmp_path, out, cfg))
    acc = (out / "m8/n6/tiny/my_questions/accuracies.csv").read_text().splitlines()
    assert acc[0] == "base,extra,test,majority,num_classes,majority_all,leak"
    spec, docs = docs_of(plain, "my_questions", n=6)
    rows = [int(r) for r in docs["test"]["row"]]
    lm = HFLM(pretrained=str(tiny_llama), batch_size=8, device="cpu")
    direct = evaluate(lm, {spec.task_name: spec.task}, samples={spec.task_name: rows}, bootstrap_iters=0)
    base = float(acc[1].split(",")[0])
    assert base == pytest.approx(direct["results"]["my_questions"]["acc,none"])
    unit = json.loads((out / "m8/n6/tiny/my_questions/units/0.json").read_text())
    assert unit["num_classes"] == 3 and unit["chance"] == pytest.approx(1 / 3)  # the mean of 1/K
    # the study's majority_all: the share of the pool's most frequent gold index
    assert unit["majority_all"] == spec.pool()["label"].value_counts(normalize=True).max()


def test_the_classifier_flow_refuses_per_doc_choices(plain, tiny_llama, tmp_path):
    cfg = {
        "base": str(tiny_llama),
        "flow": "classifier",
        "tasks": ["my_questions"],
        "include_path": [str(plain)],
    }
    with pytest.raises(SettingsError, match="task 'my_questions': flow classifier .* differ from doc to doc"):
        load_config(write_grid_config(tmp_path, tmp_path / "c", {**cfg, "m": 8, "n": 6}))


def test_chat_prompts_on_an_lm_eval_task_are_refused_before_the_run_writes(plain, tiny_llama, tmp_path):
    cfg = {"base": str(tiny_llama), "tasks": ["my_reviews"], "include_path": [str(plain)], "m": 8, "n": 6}
    path = write_grid_config(tmp_path, tmp_path / "out", cfg | {"prompt_format": "chat"})
    with pytest.raises(
        SystemExit, match="my_reviews is an lm-eval task with its own .* --prompt-format plain"
    ):
        main(["run", "--config", str(path), "--no-summary"])
    assert not (tmp_path / "out").exists()  # was: a log and a manifest, then the error


def test_a_generation_task_is_a_task_of_the_design_unless_its_metric_is_the_corpus(plain, tmp_path):
    """generate_until with lm-eval's default metric (exact_match, per document) is read as any task; a
    corpus metric (BLEU over all documents) is refused naming why: the conditions' documents pair."""
    (tmp_path / "gen.yaml").write_text(
        "task: my_gen\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {plain / 'reviews.jsonl'}\noutput_type: generate_until\ntest_split: test\n"
        "doc_to_text: '{{text}}'\ndoc_to_target: '{{sentiment}}'\n"
    )
    spec = find_spec("my_gen", [str(tmp_path)])
    assert spec.generative and spec.classes is None
    bleu, rolling = tmp_path / "bleu", tmp_path / "rolling"  # lm-eval indexes a folder once
    bleu.mkdir()
    rolling.mkdir()
    (bleu / "bleu.yaml").write_text(
        (tmp_path / "gen.yaml").read_text().replace("my_gen", "my_bleu")
        + "metric_list:\n  - metric: bleu\n    aggregation: bleu\n"
    )
    with pytest.raises(TaskError, match="metric bleu is computed over the whole corpus, not per document"):
        find_spec("my_bleu", [str(bleu)])
    rolled = (tmp_path / "gen.yaml").read_text().replace("my_gen", "my_rolling")
    (rolling / "rolling.yaml").write_text(rolled.replace("generate_until", "loglikelihood_rolling"))
    with pytest.raises(TaskError, match="output_type 'loglikelihood_rolling'.*multiple-choice tasks and"):
        find_spec("my_rolling", [str(rolling)])


@pytest.mark.slow
def test_an_unknown_task_is_looked_up_in_lm_evals_own_tasks_too(plain):
    with pytest.raises(TaskError, match="unknown task 'nope'.*nor is it a task lm-eval knows"):
        find_spec("nope", [str(plain)])


def test_folder_names_are_safe_and_distinct():
    assert folder_name("arc_easy") == "arc_easy"
    assert folder_name("a/b") != folder_name("a:b") and "/" not in folder_name("a/b")


def test_a_copied_task_file_names_the_include_fix_and_tasks_new_writes_one_that_loads(tmp_path, capsys):
    copied = tmp_path / "tapt_copied.yaml"
    copied.write_text((TASKS_DIR / "tapt_trec.yaml").read_text().replace("tapt_trec", "tapt_copied"))
    with pytest.raises(
        TaskError, match=f"write `include: {TASKS_DIR}/_template_yaml`, or let `tapt-bench tasks new"
    ):
        load_task_config(copied)
    main(["tasks", "new", "my_task", "--out", str(tmp_path)])
    written = load_task_config(tmp_path / "tapt_my_task.yaml")
    assert written["task"] == "tapt_my_task" and written["output_type"] == "multiple_choice"
    with pytest.raises(SystemExit, match="exists"):
        main(["tasks", "new", "my_task", "--out", str(tmp_path)])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["my reviews"], "slug 'my reviews' is not valid: use lowercase letters, .* e.g. 'my_reviews'"),
        (["MyReviews"], "slug 'MyReviews' is not valid: .* e.g. 'myreviews'"),
        (["x/../../escaped"], "slug 'x/../../escaped' is not valid"),
        (["ag_news"], "'ag_news' is a shipped task .*tapt_ag_news.yaml"),
        (["fine", "--out", "{file}"], "--out .*a_file exists and is not a folder; name a folder"),
    ],
)
def test_tasks_new_refuses_a_bad_slug_a_shipped_task_or_an_out_file_and_writes_nothing(
    tmp_path, argv, message
):
    (tmp_path / "a_file").write_text("")
    out = tmp_path / "out"
    argv = [a.format(file=tmp_path / "a_file") for a in argv]
    with pytest.raises(SystemExit, match=message):
        main(["tasks", "new", *argv, *([] if "--out" in argv else ["--out", str(out)])])
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


def test_validate_flags_a_bad_slug_and_a_duplicate_of_a_shipped_task(tmp_path, data_dir, capsys):
    main(["tasks", "new", "fine", "--out", str(tmp_path)])
    text = (tmp_path / "tapt_fine.yaml").read_text()
    (tmp_path / "tapt_fine.yaml").write_text(
        text.replace("slug: fine", "slug: Fine").replace("tapt_fine", "tapt_Fine")
    )
    (tmp_path / "tapt_trec.yaml").write_text(text.replace("fine", "trec"))
    with pytest.raises(SystemExit):
        main(["tasks", "validate", str(tmp_path), "--data-dir", str(data_dir)])
    shown = capsys.readouterr().out
    assert "slug 'Fine' is not valid" in shown
    assert f"task tapt_trec is defined in {TASKS_DIR.resolve() / 'tapt_trec.yaml'} too" in shown


def test_validate_says_a_task_name_two_files_define_an_output_type_it_cannot_run_and_an_empty_folder(
    tmp_path, data_dir, capsys
):
    for folder in ("a", "b"):
        main(["tasks", "new", "twice", "--out", str(tmp_path / folder)])
    generative = tmp_path / "a" / "gen.yaml"  # a generative YAML beside a tapt one, under the same name
    generative.write_text("task: tapt_twice\noutput_type: generate_until\ndataset_path: x\n")
    odd = tmp_path / "b" / "odd.yaml"
    odd.write_text("task: my_odd\noutput_type: loglikelihood_rolling\ndataset_path: x\n")
    with pytest.raises(SystemExit) as exit_:
        main(["tasks", "validate", str(tmp_path / "a"), "--include-path", str(tmp_path / "b")])
    shown = capsys.readouterr().out
    assert exit_.value.code == 1
    twice = f"{tmp_path / 'a' / 'tapt_twice.yaml'}: task tapt_twice is defined in {generative}, "
    assert twice + f"{tmp_path / 'b' / 'tapt_twice.yaml'} too" in shown
    assert "0 ok, 2 with problems" in shown
    with pytest.raises(SystemExit) as exit_:
        main(["tasks", "validate", str(tmp_path / "b")])
    said = f"FAIL {odd}\n     - {odd}: output_type 'loglikelihood_rolling': the design scores"
    assert said in capsys.readouterr().out and exit_.value.code == 1  # was "0 ok, 0 with problems", exit 0
    with pytest.raises(SystemExit, match="task tapt_twice is defined twice"):  # the flag given twice: both
        main(
            ["tasks", "show", "--task", "twice", "--include-path", str(tmp_path / "a"), "--include-path"]
            + [str(tmp_path / "b")]
        )
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="empty: no task YAML in it"):
        main(["tasks", "validate", str(tmp_path / "empty")])


def test_tasks_list_refuses_a_data_dir_that_does_not_exist(tmp_path):
    with pytest.raises(
        SystemExit, match="--data-dir .*missing \\(or \\$TAPT_BENCH_DATA_DIR\\): no such folder"
    ):
        main(["tasks", "list", "--data-dir", str(tmp_path / "missing")])


@pytest.mark.slow
def test_a_task_whose_yaml_does_not_parse_is_named_with_its_parse_error(tmp_path):
    (tmp_path / "tapt_mine.yaml").write_text("task: tapt_mine\ndataset_kwargs: [unclosed\n")
    with pytest.raises(
        SystemExit,
        match="unknown task 'mine'.*\n.*unreadable, and it may be the task: .*tapt_mine.yaml: malformed YAML",
    ):
        main(["tasks", "show", "--task", "mine", "--include-path", str(tmp_path)])


def test_a_group_named_as_a_task_and_a_task_with_empty_texts_are_refused_before_a_run_writes(
    plain, tmp_path, tiny_llama, data_dir, capsys
):
    """A group is not a task (named as one in a run, and validated as a file); a task whose every
    document's text is empty has nothing for TAPT to read (run and validate alike)."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "group.yaml").write_text("group: my_group\ntask: [my_reviews, my_questions]\n")
    rows = [json.loads(line) for line in (plain / "reviews.jsonl").read_text().splitlines()]
    (tasks / "blank.jsonl").write_text("".join(json.dumps({**r, "text": " "}) + "\n" for r in rows))
    (tasks / "my_blank.yaml").write_text(
        (plain / "my_reviews.yaml")
        .read_text()
        .replace("my_reviews", "my_blank")
        .replace(str(plain / "reviews.jsonl"), str(tasks / "blank.jsonl"))
        .replace('"Review: {{text}}\\nSentiment:"', '"{{text}}"')
    )
    out = tmp_path / "out"
    cfg = {"base": str(tiny_llama), "include_path": [str(plain), str(tasks)], "m": 8, "n": 6}
    for task, message in (
        ("my_group", "task 'my_group' is an lm-eval group, not a task: .*name each of its subtasks"),
        ("my_blank", "task my_blank: every evaluation doc's text .* is empty.*point doc_to_text"),
    ):
        config = write_grid_config(tmp_path, out, {**cfg, "tasks": [task]})
        with pytest.raises(SystemExit, match=message):
            main(["run", "--config", str(config), "--data-dir", str(data_dir)])
        assert not out.exists()
    for path in (tasks, tasks / "group.yaml"):  # a folder's groups are skipped; a group named is refused
        with pytest.raises(SystemExit):
            main(["tasks", "validate", str(path), "--m", "8", "--n", "6"])
    shown = capsys.readouterr().out
    assert "group.yaml: a group YAML (group: my_group)" in shown and "my_blank: every evaluation doc" in shown


@pytest.mark.slow
def test_the_designs_lm_eval_command_runs_as_written_on_an_adapter_train_made(
    tiny_llama, data_dir, tmp_path, capsys
):
    """`lm_eval --model hf --model_args peft=ADAPTER --tasks tapt_ag_news --metadata ...`: no
    --include_path, no pretrained= (the adapter's config names its base), run as `train` prints it."""
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    from transformers import AutoTokenizer

    ad = tmp_path / "ad"
    main(
        [*"train --task ag_news --split test --m 4 --n 6 --quantize none --data-dir".split(), str(data_dir)]
        + ["--base", str(tiny_llama), "--out", str(ad)]
    )
    command = capsys.readouterr().out.strip().splitlines()[-1]
    argv = shlex.split(command)
    assert argv[:5] == ["lm_eval", "--model", "hf", "--model_args", f"peft={ad}"]
    assert "--include_path" not in argv and "pretrained" not in command
    lm_eval = str(Path(sys.executable).parent / "lm_eval")
    done = subprocess.run(
        [lm_eval, *argv[1:], "--output_path", str(tmp_path / "eval")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(next((tmp_path / "eval").rglob("results_*.json")).read_text())
    assert results["n-samples"]["tapt_ag_news"]["effective"] == 6
    trained = json.loads((ad / "tapt.json").read_text())["adapter_sha256"]
    assert len(trained) == 64 and results["config"]["peft_sha256"] == trained  # the adapter it scored
    assert results["config"]["model_args"] == {"peft": str(ad)} or f"peft={ad}" in str(results["config"])
    missing = subprocess.run(
        [lm_eval, "--model", "hf", "--model_args", f"peft={tmp_path / 'nowhere'}", "--tasks", "tapt_ag_news"],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert missing.stderr.strip().splitlines()[-1].startswith("lm_eval: error: lm_eval --model_args peft=")
    other = subprocess.run(  # an adapter beside a base it was not trained on: one line naming both
        [lm_eval, "--model", "hf", "--model_args", f"pretrained={tmp_path / 'other-base'},peft={ad}"]
        + ["--tasks", "tapt_ag_news"],
        capture_output=True,
        text=True,
    )
    last = other.stderr.strip().splitlines()[-1]
    assert other.returncode == 1 and "Traceback" not in other.stderr
    assert f"was trained on {str(tiny_llama)!r}, not on pretrained=" in last and "other-base" in last
    for model_args, flags, said in (
        ("pretrained=/no/such/base", [], "lm_eval --model_args pretrained=/no/such/base: cannot load it"),
        (f"peft={ad}", ["--metadata", "{m: 2"], "argument --metadata: Invalid JSON"),
        (f"peft={ad}", argv[argv.index("--metadata") :][:2], "its weights do not fit pretrained="),
    ):
        if "fit" in said:  # the adapter's config names a base of another shape: PEFT's size mismatch
            from transformers import AutoConfig, AutoModelForCausalLM

            config = AutoConfig.from_pretrained(tiny_llama)
            config.hidden_size *= 2
            AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "wider")
            AutoTokenizer.from_pretrained(tiny_llama).save_pretrained(tmp_path / "wider")
            adapter_config = json.loads((ad / "adapter_config.json").read_text())
            adapter_config["base_model_name_or_path"] = str(tmp_path / "wider")
            (ad / "adapter_config.json").write_text(json.dumps(adapter_config))
        bad = subprocess.run(
            [lm_eval, "--model", "hf", "--model_args", model_args, "--tasks", "tapt_ag_news", *flags],
            capture_output=True,
            text=True,
        )
        assert bad.returncode in (1, 2) and "Traceback" not in bad.stderr, bad.stderr[-1500:]
        assert said in bad.stderr.strip().splitlines()[-1]
    adapter_config["base_model_name_or_path"] = str(tiny_llama)  # the adapter's own base again
    (ad / "adapter_config.json").write_text(json.dumps(adapter_config))
    record = json.loads((ad / "tapt.json").read_text())
    (ad / "tapt.json").write_text(json.dumps({**record, "adapter_sha256": "f" * 64}))  # another's record
    copied = subprocess.run(
        [lm_eval, "--model", "hf", "--model_args", f"peft={ad}", "--tasks", "tapt_ag_news"],
        capture_output=True,
        text=True,
    )
    assert copied.returncode == 1 and "Traceback" not in copied.stderr, copied.stderr[-1500:]
    said = copied.stderr.strip().splitlines()[-1]
    assert f"records adapter_sha256 ffffffffffff…, but the adapter's own files hash {trained[:12]}…" in said
    (ad / "tapt.json").write_text(json.dumps(record))
    cut = tmp_path / "cut"  # an adapter copied half way: one line, not safetensors' traceback
    shutil.copytree(ad, cut)
    with open(cut / "adapter_model.safetensors", "r+b") as f:
        f.truncate((cut / "adapter_model.safetensors").stat().st_size // 2)
    damaged = subprocess.run(
        [lm_eval, "--model", "hf", "--model_args", f"peft={cut}", "--tasks", "tapt_ag_news"],
        capture_output=True,
        text=True,
    )
    assert damaged.returncode == 1 and "Traceback" not in damaged.stderr, damaged.stderr[-1500:]
    assert f"peft={cut}: adapter_model.safetensors is not a whole weights file" in damaged.stderr
    (cut / "adapter_model.safetensors").unlink()  # copied without its weights: one line, not the hub's error
    bare = subprocess.run(
        [lm_eval, "--model", "hf", "--model_args", f"peft={cut}", "--tasks", "tapt_ag_news"],
        capture_output=True,
        text=True,
    )
    assert bare.returncode == 1 and "Traceback" not in bare.stderr, bare.stderr[-1500:]
    assert f"peft={cut}: an adapter folder without its weights" in bare.stderr
    moved = tmp_path / "moved"  # its config names a base that is gone: said as the adapter's, not as
    shutil.copytree(ad, moved)  # a pretrained= the user never wrote
    moved_config = json.loads((moved / "adapter_config.json").read_text())
    (moved / "adapter_config.json").write_text(
        json.dumps({**moved_config, "base_model_name_or_path": "/gone"})
    )
    gone = subprocess.run(
        [lm_eval, "--model", "hf", "--model_args", f"peft={moved}", "--tasks", "tapt_ag_news"],
        capture_output=True,
        text=True,
    )
    last = gone.stderr.strip().splitlines()[-1]
    assert gone.returncode == 1 and "Traceback" not in gone.stderr, gone.stderr[-1500:]
    assert f"peft={moved}: its base (adapter_config.json's base_model_name_or_path) /gone: cannot" in last
    assert last.endswith("pass pretrained=BASE, the base it was trained on, or fix that key")
    typo = subprocess.run(
        [lm_eval, "--model", "hf", "--model_args", f"peft={ad}", "--tasks", "tapt_ag_nwes"],
        capture_output=True,
        text=True,
    )
    assert typo.returncode == 1 and "Traceback" not in typo.stderr
    assert "tapt_ag_nwes: did you mean tapt_ag_news" in typo.stderr.strip().splitlines()[-1]


def test_a_mistyped_tapt_task_gets_the_nearest_names():
    from lm_eval.tasks import TaskManager

    from harness.core.plumbing.errors import UserError

    with pytest.raises(UserError, match="tapt_rotten_tomatos: did you mean tapt_rotten_tomatoes"):
        TaskManager(include_defaults=False).match_tasks(["tapt_rotten_tomatos"])


def test_a_broken_task_yaml_under_include_path_is_named_as_run_names_it(tmp_path):
    """lm-eval skips a YAML it cannot parse and then knows no such task: the error names the file and its
    line, in the words `tapt-bench run` uses."""
    from lm_eval.tasks import TaskManager

    from harness.core.plumbing.errors import UserError
    from harness.tasks.spec import TASKS_DIR

    text = (TASKS_DIR / "tapt_trec.yaml").read_text().replace("task: tapt_trec", "task: tapt_mine")
    (tmp_path / "tapt_mine.yaml").write_text(text + "dataset_kwargs:\n  text_field: [unclosed\n")
    with pytest.raises(UserError) as raised:
        TaskManager(include_path=str(tmp_path), include_defaults=False).match_tasks(["tapt_mine"])
    said = str(raised.value)
    assert f"unreadable, and it may be the task: {tmp_path / 'tapt_mine.yaml'}: malformed YAML" in said
    assert "text_field: [unclosed" in said  # the line, as YAML's parser quotes it


def test_the_installed_hook_adds_the_tapt_tasks_to_every_task_manager_once():
    from lm_eval.tasks import TaskManager

    found = TaskManager(include_defaults=False)
    assert "tapt_ag_news" in found.all_tasks and "tapt_all" in found.all_groups
    again = TaskManager(include_path=str(TASKS_DIR), include_defaults=False)  # named too: scanned once
    assert again.all_tasks == found.all_tasks


def test_every_lm_eval_function_the_install_wraps_still_takes_the_parameters_it_reads():
    """The install wraps four of lm-eval's own functions (each for a hook lm-eval lacks, said beside it):
    where lm-eval renames or reorders the parameters a wrapper reads, this fails before a user does."""
    import importlib
    import inspect

    from harness.scoring.lm_eval_registration import PATCHED

    for (module, qualname), (params, why) in PATCHED.items():
        found = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
        names = tuple(inspect.signature(inspect.unwrap(found)).parameters)
        assert names[: len(params)] == params, (qualname, names)
        assert why
    assert len(PATCHED) == 4


def test_tasks_show_reads_a_generative_task_without_metric_list_and_names_a_yaml_lm_eval_cannot_build(
    tmp_path, capsys
):
    rows = [{"q": f"question {i}?", "a": ["yes", "no"][i % 2]} for i in range(60)]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    head = f"dataset_path: json\ndataset_kwargs:\n  data_files: {tmp_path / 'd.jsonl'}\ntest_split: train\n"
    (tmp_path / "gen.yaml").write_text(
        f"task: my_gen\n{head}output_type: generate_until\n"
        "doc_to_text: '{{q}}'\ndoc_to_target: '{{a}}'\n"
    )
    (tmp_path / "bad.yaml").write_text(  # a target that is neither an index nor a template of one
        f"task: my_bad\n{head}output_type: multiple_choice\ndoc_to_text: '{{{{q}}}}'\n"
        "doc_to_choice: '{{a}}'\ndoc_to_target: 7\n"
    )
    argv = ["tasks", "show", "--include-path", str(tmp_path), "--m", "10", "--n", "10"]
    main([*argv, "--task", "my_gen"])  # was IndexError: list index out of range
    assert "metrics: ['exact_match'] (none named: lm-eval's default); the summary reads exact_match" in (
        capsys.readouterr().out
    )
    with pytest.raises(SystemExit, match="task 'my_bad': lm-eval cannot build it \\(ValueError: malformed"):
        main([*argv, "--task", "my_bad"])  # was lm-eval's traceback


@pytest.mark.parametrize(
    "rest, said",
    [
        ("doc_to_choice: ['yes', 'no']\ndoc_to_target: [1, 2]\n",
         "doc_to_target gives [1, 2] for a document; the design scores one gold answer each"),
        ("doc_to_target: '{{a}}'\n", "output_type multiple_choice and no doc_to_choice: add doc_to_choice"),
    ],
)  # fmt: skip
def test_a_multiple_choice_yaml_without_one_gold_answer_among_its_choices_is_one_line(
    tmp_path, capsys, rest, said
):
    rows = [{"q": f"question {i}?", "a": ["yes", "no"][i % 2]} for i in range(60)]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    path = tmp_path / "t.yaml"
    path.write_text(
        f"task: my_t\ndataset_path: json\ndataset_kwargs:\n  data_files: {tmp_path / 'd.jsonl'}\n"
        f"test_split: train\noutput_type: multiple_choice\ndoc_to_text: '{{{{q}}}}'\n{rest}"
    )
    with pytest.raises(SystemExit) as exit_:
        main(["tasks", "validate", str(path), "--m", "10", "--n", "10"])
    assert exit_.value.code == 1 and f"task my_t: {said}" in capsys.readouterr().out
    with pytest.raises(SystemExit, match=re.escape(said)):  # show, where it was a bare traceback
        main(["tasks", "show", "--task", "my_t", "--include-path", str(tmp_path), "--m", "10", "--n", "10"])
