import numpy as np
import pytest

from harness.core.plumbing.errors import TaskError
from harness.tasks import prompts
from harness.tasks.protocol import subsample_docs
from harness.tasks.spec import TASKS_DIR, all_slugs, load_spec, load_task_config
from harness.tasks.subsample import SampleSettings
from harness.tasks.validate import build_task, render_first

OFFLINE_MISSING = {
    "app_reviews",
    "frenk_hate_en",
    "mtop_domain",
    "patent_classification",
    "yahoo_answers_topics",
}

AG_NEWS_PROMPT = (
    "Your task is to classify a given text as one of these categories:\n"
    "World\nSports\nBusiness\nSci/Tech\n\n"
    "The text is a news article. Answer with its topic.\n\n"
    "### Text: {text}\n ### Answer:"
)


def test_every_task_yaml_is_a_member_of_tapt_all_in_lm_evals_index():
    from lm_eval.tasks import TaskManager

    index = TaskManager(include_path=str(TASKS_DIR), include_defaults=False).task_index
    task_files = {  # the classification tasks (a generative one is tagged tapt_generative)
        load_task_config(p)["task"]
        for p in TASKS_DIR.glob("tapt_*.yaml")
        if "task" in load_task_config(p)
        and "group" not in load_task_config(p)
        and load_task_config(p).get("tag") == "tapt_tasks"
    }
    assert len(task_files) >= 25 and task_files == {f"tapt_{s}" for s in all_slugs()}
    assert index["tapt_all"].cfg["task"] == ["tapt_tasks"] and index["tapt_tasks"].tags == task_files


@pytest.mark.parametrize("slug", all_slugs())
def test_every_yaml_loads_with_consistent_facts(slug):
    spec = load_spec(slug)
    assert spec.slug == slug and len(spec.classes) >= 2 and spec.instruction.endswith(".")


def test_zero_shot_prompt_layout_and_1000_char_cut():
    spec = load_spec("ag_news")
    assert prompts.zero_shot(spec, "Hello.") == AG_NEWS_PROMPT.format(text="Hello.")
    assert prompts.zero_shot(spec, "x" * 1500) == AG_NEWS_PROMPT.format(text="x" * 1000)


def test_lm_eval_renders_our_prompt_and_scores_class_names(data_dir):
    task = build_task(TASKS_DIR / "tapt_ag_news.yaml", {"data_dir": str(data_dir), "n": 7, "m": 8})
    docs = list(task.test_docs())
    assert len(docs) == 7 and len(list(task.training_docs())) == 8
    shown = render_first(task)
    assert shown["prompt"] == AG_NEWS_PROMPT.format(text=docs[0]["text"][:1000])
    assert (
        shown["choices"] == ["World", "Sports", "Business", "Sci/Tech"]
        and shown["delimiter"] == prompts.ANSWER_DELIMITER
    )
    assert shown["target"] == shown["choices"][docs[0]["label"]]


def test_metadata_split_selects_the_subsample_split(data_dir):
    meta = {"data_dir": str(data_dir), "n": 5, "m": 8, "subsample": 1}
    rows = {
        s: [d["row"] for d in build_task(TASKS_DIR / "tapt_trec.yaml", {**meta, "split": s}).test_docs()]
        for s in ("extra", "test")
    }
    assert len(rows["extra"]) == len(rows["test"]) == 5 and not set(rows["extra"]) & set(rows["test"])


@pytest.mark.parametrize("slug", sorted(OFFLINE_MISSING))
def test_tasks_without_offline_data_say_so(slug, data_dir):
    with pytest.raises(TaskError) as err:
        build_task(TASKS_DIR / f"tapt_{slug}.yaml", {"data_dir": str(data_dir)}).test_docs()
    msg = str(err.value)
    assert f"tapt_{slug}" in msg and "not available offline" in msg and "data.parquet" in msg


def test_lm_evals_own_hf_model_scores_what_the_grid_scores(tiny_llama, data_dir):
    """What `lm_eval --model hf --include_path ... --tasks tapt_ag_news --metadata ...` computes (its
    simple_evaluate, on the model by path) equals the grid's scoring of the loaded model, doc by doc."""
    from lm_eval import simple_evaluate
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.scoring.zero_shot import lm_eval_task, score, scorer
    from harness.tasks.spec import lm_eval_tasks

    metadata = {"data_dir": str(data_dir), "n": 10}
    cli = simple_evaluate(
        model="hf",
        model_args=f"pretrained={tiny_llama}",
        device="cpu",
        tasks=["tapt_ag_news"],
        task_manager=lm_eval_tasks([], metadata),
        log_samples=True,
        verbosity="ERROR",
    )
    model, tok = AutoModelForCausalLM.from_pretrained(tiny_llama), AutoTokenizer.from_pretrained(tiny_llama)
    spec = load_spec("ag_news")
    test = subsample_docs(spec, SampleSettings(data_dir=str(data_dir), n=10), 0)["test"]
    ours = score(scorer(model, tok, 8), lm_eval_task(spec, metadata, [], test))
    assert len(ours) == 10 and cli["results"]["tapt_ag_news"]["acc,none"] == pytest.approx(
        ours["correct"].mean()
    )
    theirs = sorted(cli["samples"]["tapt_ag_news"], key=lambda s: s["doc_id"])
    for sample, probs in zip(theirs, ours["probs"]):
        ll = np.array([float(r[0]) for r in sample["filtered_resps"]])
        assert np.exp(ll - ll.max()) / np.exp(ll - ll.max()).sum() == pytest.approx(probs, abs=1e-6)
