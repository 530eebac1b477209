"""The exposure test on a whole released split against a reference of the user's choosing (another
split of the task, or a file of documents in the task's format), the shift check, and their input
errors, all before any model is scored."""

import json

import numpy as np
import pandas as pd
import pytest
from helpers import planted

from contamination import doc_scores
from contamination.exposure import exposure_test
from contamination.exposure_run import ExposureArgs
from contamination.verdict import flags, shifted, verdict
from harness.cli.main import main
from harness.core.engine import models
from harness.core.plumbing.errors import UserError

ROWS = 24  # documents per split of the fixture task


@pytest.fixture(scope="module")
def split_task(tmp_path_factory, data_dir):
    """`my_splits`: an lm-eval task of rotten_tomatoes reviews with a test and a validation split, and
    two files in its format: more reviews (the same distribution) and trec questions (shifted)."""
    folder = tmp_path_factory.mktemp("split_task")
    pool = pd.read_parquet(data_dir / "rotten_tomatoes" / "data.parquet")
    reviews = pd.concat([pool[pool["label"] == y].iloc[:60] for y in (0, 1)]).sample(frac=1, random_state=0)
    reviews = reviews.assign(sentiment=reviews["label"].map({0: "negative", 1: "positive"}))[
        ["text", "sentiment"]
    ]
    for name, part in (
        ("test", reviews[:ROWS]),
        ("validation", reviews[ROWS : 2 * ROWS]),
        ("more", reviews[60:]),
    ):
        part.to_json(folder / f"{name}.jsonl", orient="records", lines=True)
    questions = pd.read_parquet(data_dir / "trec" / "data.parquet").iloc[:ROWS]
    questions.assign(sentiment="positive")[["text", "sentiment"]].to_csv(
        folder / "questions.csv", index=False
    )
    (folder / "my_splits.yaml").write_text(
        "task: my_splits\ndataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {folder / 'test.jsonl'}\n"
        f"    validation: {folder / 'validation.jsonl'}\n"
        "output_type: multiple_choice\ntest_split: test\nvalidation_split: validation\n"
        'doc_to_text: "Review: {{text}}\\nSentiment:"\ndoc_to_choice: [negative, positive]\n'
        'doc_to_target: "{{sentiment}}"\nmetric_list:\n  - metric: acc\n'
    )
    return folder


def args(folder, **kw):
    return ExposureArgs(task="my_splits", include_path=[str(folder)], **kw)


def test_the_suspect_is_the_whole_split_and_the_reference_another_split_or_a_file(split_task):
    _, docs, names = args(split_task, suspect_split="test", reference_split="validation").documents()
    assert (docs["split"] == "test").sum() == ROWS and (docs["split"] == "extra").sum() == ROWS
    assert names == {"test": f"the test split ({ROWS} docs)", "extra": f"the validation split ({ROWS} docs)"}
    file = split_task / "more.jsonl"
    _, docs, names = args(
        split_task, suspect_split="test", reference_file=str(file), reference_n=10
    ).documents()
    extra = docs[docs["split"] == "extra"]
    assert (
        len(extra) == 10
        and extra["prompt"].iloc[0].startswith("Review: ")
        and names["extra"].startswith(str(file))
    )
    assert set(extra["label"]) <= {0, 1} and all(c == ["negative", "positive"] for c in extra["choices"])
    _, again, _ = args(split_task, suspect_split="test", reference_file=str(file), reference_n=10).documents()
    pd.testing.assert_frame_equal(docs, again)  # the seeded sample is the same every time


def test_a_model_adapted_on_the_whole_split_is_flagged_and_the_base_is_not(split_task, tiny_llama):
    spec, docs, names = args(split_task, suspect_split="test", reference_split="validation").documents()
    tokenizer = models.tokenizer(str(tiny_llama))
    base = doc_scores.prompt_scores(models.load_scoring_model(str(tiny_llama))[0], tokenizer, spec, docs)
    memorised = doc_scores.prompt_scores(
        planted(tiny_llama, tokenizer, spec, docs, False), tokenizer, spec, docs
    )
    result = exposure_test(memorised, base, names=names)
    assert flags(result)["text"] and result["text"]["p_test"] < 0.001
    assert "text of the test split (24 docs): SEEN" in "\n".join(verdict(result))
    itself = exposure_test(base, base, names=names)
    assert not any(flags(itself).values()) and itself["text"]["p_test"] == 1.0


def test_the_shift_check_fires_where_the_base_alone_separates_suspect_and_reference(split_task, tiny_llama):
    spec, docs, names = args(split_task, suspect_split="test", reference_split="validation").documents()
    base = doc_scores.prompt_scores(
        *reversed([models.tokenizer(str(tiny_llama)), models.load_scoring_model(str(tiny_llama))[0]]),
        spec,
        docs,
    )
    same = exposure_test(base, base, names=names)
    assert shifted(same) == [] and "REFERENCE SHIFTED" not in "\n".join(verdict(same))
    easier = base.assign(
        text=base["text"] + 2.0 * (base["split"] == "extra")
    )  # a reference any model finds easier
    result = exposure_test(easier, easier, names=names)
    assert shifted(result) == ["text"] and result["shift"]["text"]["p_two_sided"] < 0.001
    shown = "\n".join(verdict(result))
    assert (
        "REFERENCE SHIFTED: the base alone separates the test split (24 docs) from the validation split"
        in shown
    )
    text_line = next(line for line in shown.splitlines() if line.startswith("text of"))
    assert text_line.endswith("(UNRELIABLE: the reference is shifted on this statistic)")


def test_the_command_writes_the_shift_check_beside_the_verdict(split_task, tiny_llama, tmp_path, capsys):
    out = tmp_path / "r.json"
    main(
        f"contamination exposure --task my_splits --include-path {split_task} --suspect-split test "
        f"--reference-file {split_task / 'questions.csv'} --base {tiny_llama} --out {out}".split()
    )
    shown = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert (
        set(result["shift"]) == {"text", "label", "confidence"} and "p_two_sided" in result["shift"]["text"]
    )
    assert (
        f"suspect the test split ({ROWS} docs), reference {split_task / 'questions.csv'} ({ROWS} docs)"
        in shown
    )
    assert "shift text" in shown and "text of the test split" in shown


@pytest.mark.parametrize(
    "flags_, message",
    [
        ("--suspect-split test", "--suspect-split test needs a reference the model cannot have seen"),
        (
            "--suspect-split test --reference-split test",
            "--suspect-split and --reference-split both name 'test'",
        ),
        (
            "--suspect-split dev --reference-split test",
            "task my_splits has no split 'dev': its splits are \\['test', 'validation'\\]",
        ),
        (
            "--suspect-split test --reference-split validation --suspect-n 999",
            "--suspect-n \\(the test split\\): n = 999 exceeds its 24 documents",
        ),
        (
            "--suspect-split test --reference-split validation --reference-file x.csv",
            "--reference-split and --reference-file both given",
        ),
        (
            "--suspect-split test --reference-file {folder}/nothing.csv",
            "nothing.csv: no such file",
        ),
        (
            "--suspect-split test --reference-file {folder}/bad.csv",
            "bad.csv: missing column\\(s\\) \\['sentiment'\\] of task my_splits",
        ),
    ],
)
def test_bad_sources_are_refused_before_any_model_is_loaded(split_task, flags_, message, tmp_path):
    pd.DataFrame({"text": ["a review"]}).to_csv(split_task / "bad.csv", index=False)
    command = f"contamination exposure --task my_splits --include-path {split_task} --base no/such-model "
    with pytest.raises(SystemExit, match=message):
        main((command + flags_.format(folder=split_task)).split())


def test_a_tapt_task_offers_its_pool_as_the_suspect_split_and_reads_a_file_of_class_names(data_dir, tmp_path):
    file = tmp_path / "mine.csv"
    pd.DataFrame(
        {"text": ["a fine film", "a dull film", "  "], "label": ["positive", "negative", "positive"]}
    ).iloc[:2].to_csv(file, index=False)
    sample = dict(task="rotten_tomatoes", data_dir=str(data_dir), suspect_split="train", suspect_n=12)
    spec, docs, names = ExposureArgs(**sample, reference_file=str(file)).documents()
    extra = docs[docs["split"] == "extra"]
    assert list(extra["label"]) == [1, 0] and "a fine film" in extra["prompt"].iloc[0]
    assert (docs["split"] == "test").sum() == 12 and names["test"] == "the train split (12 docs)"
    with pytest.raises(
        SystemExit, match="task tapt_rotten_tomatoes has no split 'test': its splits are \\['train'\\]"
    ):
        main(
            f"contamination exposure --task rotten_tomatoes --data-dir {data_dir} --suspect-split test "
            f"--reference-file {file}".split()
        )
    pd.DataFrame({"text": ["a film"], "label": ["great"]}).to_csv(file, index=False)
    with pytest.raises(SystemExit, match="label 'great' is not one of \\['negative', 'positive'\\]"):
        main(
            f"contamination exposure --task rotten_tomatoes --data-dir {data_dir} --suspect-split train "
            f"--reference-file {file}".split()
        )


def test_a_reference_with_fractional_labels_or_a_suspect_document_is_refused(data_dir, tmp_path):
    sample = dict(task="rotten_tomatoes", data_dir=str(data_dir), suspect_split="train", suspect_n=12)
    file = tmp_path / "ref.csv"
    pd.DataFrame({"text": ["a fine film", "a dull film"], "label": [0.5, 1]}).to_csv(file, index=False)
    with pytest.raises(UserError, match="row 0: label 0.5 is neither a class index .* 1 row\\(s\\) like it"):
        ExposureArgs(**sample, reference_file=str(file)).documents()
    films = [f"film number {i}" for i in range(12)]
    pd.DataFrame({"text": films, "label": [0] * 12}).to_csv(file, index=False)
    docs = ExposureArgs(**sample, reference_file=str(file)).documents()[1]
    suspect = docs.loc[docs["split"] == "test", "text"].iloc[0]
    pd.DataFrame({"text": [suspect + " ", *films], "label": [0] * 13}).to_csv(file, index=False)
    with pytest.raises(
        UserError, match="1 of the reference documents .* are also suspect documents, whitespace"
    ):
        ExposureArgs(**sample, reference_file=str(file)).documents()


REVIEWS = [
    "A Warm, Funny Film That Never Condescends To Its Audience.",
    "The plot is thin, but the performances carry it a long way.",
    "Spielberg's best work in a decade: tense, humane and beautifully shot.",
    "An overlong mess; even the jokes feel tired by the second act.",
    "Charming, if slight. Kids will love it; parents may check their watches.",
    "It's a bold, strange movie, and I admired nearly every minute of it.",
    "Dull. The script mistakes noise for wit, and volume for feeling.",
    "Hanks is terrific, and the final scene earns every tear it draws.",
    "A clumsy thriller whose twists arrive exactly when you expect them.",
    "Smart, brisk and generous: the rare sequel that improves on the original.",
    "Nothing here you haven't seen before, done better, in 1994.",
    "The cast is game, but the material gives them nowhere to go.",
    "Gorgeous to look at, empty to think about; a postcard, not a film.",
    "By turns hilarious and heartbreaking, with a superb lead turn.",
    "A tedious, self-important slog that confuses length with depth.",
    "Quietly devastating. One of the year's best, and one of its bravest.",
]


def frames(effect: float, n: int, margin_effect: float = 0.0):
    """(suspect model's, base's) scores of n suspect and n reference documents: the suspect documents
    gain `effect` nats/token (and `margin_effect` nats of margin) over the reference under the model."""
    rng = np.random.default_rng(0)
    base = pd.DataFrame(
        {
            "split": ["test"] * n + ["extra"] * n,
            "row": list(range(n)) * 2,
            "label": [0] * 2 * n,
            "text": np.tile(rng.normal(-3.0, 0.3, n), 2),  # the same values a side: no shift in the base
            "mink": np.tile(rng.normal(0.0, 0.3, n), 2),
            "margin": np.tile(rng.normal(0.0, 0.3, n), 2),
        }
    )
    gain = np.r_[np.full(n, effect), np.zeros(n)] + rng.normal(0.3, 0.05, 2 * n)
    model = base.assign(
        text=base["text"] + gain,
        mink=base["mink"] + gain,
        margin=base["margin"] + np.r_[np.full(n, margin_effect), np.zeros(n)],
    )
    return model, base


def test_a_reference_rewritten_from_the_suspect_distribution_is_found_shifted_at_n_8():
    import string

    suspect, reference = REVIEWS[:8], REVIEWS[8:]
    model, base = frames(1.0, 8)
    plain = exposure_test(model, base, texts=suspect + reference)
    assert not plain["reference_check"]["shifted"] and plain["reference_check"]["p"] > 0.2
    assert "text of test: SEEN" in "\n".join(verdict(plain))
    strip = str.maketrans("", "", string.punctuation)
    for rewritten in (
        [r.lower().translate(strip) for r in reference],
        ["<script>x</script> ünïcödé 日本語 🎬 " + r for r in reference],
    ):
        result = exposure_test(model, base, texts=suspect + rewritten)
        check = result["reference_check"]
        assert check["shifted"] and check["p"] < 0.001, check
        shown = "\n".join(verdict(result))
        assert "INCONCLUSIVE: the reference is unlike the suspect documents" in shown
        assert "SEEN" not in shown.replace("no SEEN", "")


def test_a_whole_split_verdict_where_the_check_cannot_reach_alpha_is_inconclusive():
    model, base = frames(1.0, 3)
    result = exposure_test(model, base, texts=REVIEWS[:6])
    assert flags(result)["text"] and not result["reference_check"]["can_reject"]
    shown = "\n".join(verdict(result))
    assert "INCONCLUSIVE: too few documents to check that the reference is like the suspect" in shown
    assert "text of test: inconclusive" in shown


def test_a_label_flag_beside_a_text_flag_reads_text_or_labels():
    model, base = frames(1.0, 8, margin_effect=1.0)
    shown = "\n".join(verdict(exposure_test(model, base)))
    assert "text of test: SEEN" in shown
    assert "text or labels of test: SEEN" in shown and "cannot tell labels from text here" in shown
    only_labels = "\n".join(verdict(exposure_test(*frames(0.0, 8, margin_effect=1.0))))
    assert "labels of test: SEEN" in only_labels and "text or labels" not in only_labels


def test_a_label_flag_where_the_reference_text_was_seen_is_inconclusive():
    model, base = frames(-1.0, 8, margin_effect=1.0)  # the reference gained: its text was seen
    shown = "\n".join(verdict(exposure_test(model, base)))
    assert "labels of test: inconclusive" in shown and "the text of the reference extra was seen" in shown
