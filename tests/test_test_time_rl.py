"""Test-time RL (TTRL through TRL's GRPOTrainer): the rewards follow the majority vote of a prompt's
samples outside the leak and the gold choice inside it; the method never receives the labels outside the
leak; its records (votes and their agreement with the gold labels, rewards, zero-advantage and unmatched
shares) are written with the unit."""

import json
import re

import pytest
from helpers import one_unit

from harness.core.plumbing.errors import UserError
from harness.stats.summary.diagnostics import format_records, method_records
from tapt import methods
from tapt.methods.test_time_rl import TtrlSettings, rollout_size
from tapt.methods.test_time_rl.votes import Rewards, answer, tied, vote

CHOICES = ["World", "Sports", "Business", "Sci/Tech"]


def test_a_completion_is_read_as_the_first_choice_it_names_anywhere():
    assert answer(" Sports news", CHOICES) == 1 and answer("sci/tech", CHOICES) == 3
    assert answer(" The world", CHOICES) == 0  # named after another word: read (it was not, when an
    assert answer(" It is about Business, not Sports", CHOICES) == 2  # answer had to start the text)
    assert answer(" worldwide", CHOICES) is None and answer(" Sportswear", CHOICES) is None  # whole words
    assert answer("", CHOICES) is None and answer(" the", CHOICES) is None
    assert answer(" very positive", ["positive", "very positive"]) == 1  # same start: the longer


def test_a_tied_vote_goes_to_the_answer_sampled_first_not_to_the_lowest_class():
    assert vote([3, 1]) == 3 and vote([1, 3]) == 1 and vote([2, None, 0, 0, 2]) == 2
    assert vote([1, 2, 2, None]) == 2 and vote([None, None]) is None
    assert tied([3, 1]) and tied([2, 0, 0, 2]) and not tied([1, 2, 2]) and not tied([None, 1])


def test_the_authors_rules_read_the_last_choice_named_and_count_no_answer_as_a_vote():
    """TTRL's two rules for free text, as settings: the last answer named (free_answer: last), and ''
    voted like any answer (non_answers_vote), so that where non-answers win they are the ones rewarded."""
    assert answer(" It is about Business, not Sports", CHOICES, last=True) == 1
    assert answer(" Sports, Sports and then Business", CHOICES, last=True) == 2
    assert answer(" very positive", ["positive", "very positive"], last=True) == 1  # one place: the longer
    assert vote([None, 2, None]) == 2 and vote([None, 2, None], non_answers_vote=True) is None
    assert tied([None, 1], non_answers_vote=True) and not tied([None, 1])
    rows, samples = [7, 7, 7, 7], [" the", " Sports", " a", " Business, no: Sports"]
    first = Rewards({7: CHOICES}, gold=None)
    assert first(["p"] * 4, samples, row=rows) == [0.0, 1.0, 0.0, 0.0] and first.votes == {7: 1}  # a tie
    theirs = Rewards({7: CHOICES}, gold=None, last=True, non_answers_vote=True)
    assert theirs(["p"] * 4, samples, row=rows) == [1.0, 0.0, 1.0, 0.0] and theirs.votes == {7: None}
    leak = Rewards({7: CHOICES}, gold={7: 1}, last=True, non_answers_vote=True)  # gold: '' never right
    assert leak(["p"] * 4, samples, row=rows) == [0.0, 1.0, 0.0, 1.0]


def test_the_authors_training_rules_reach_trls_config_and_the_defaults_keep_the_records_hash(
    tmp_path, tiny_llama, data_dir
):
    """weight decay, the dual clip (TRL's delta) and the KL estimator as set are what GRPOTrainer is given;
    at their defaults they are not recorded (the study's hashes), and set they are."""
    from harness.core.engine import models
    from harness.core.plumbing.sections import recorded
    from harness.tasks.protocol import find_spec, subsample_docs
    from harness.tasks.subsample import SampleSettings
    from tapt.methods import Inputs
    from tapt.methods.test_time_rl import adapt
    from tapt.methods.test_time_rl.grpo_groups import GroupedGRPOTrainer

    given = []

    class Capture(GroupedGRPOTrainer):
        def __init__(self, *args, **kwargs):
            given.append(kwargs["args"])
            raise KeyboardInterrupt  # no training: the config is what this test reads

    spec = find_spec("ag_news")
    docs = subsample_docs(spec, SampleSettings(data_dir=str(data_dir), n=4, m=4), 0)["test"]
    model, tok = models.load_causal_lm(str(tiny_llama)), models.tokenizer(str(tiny_llama))
    for settings in (
        TtrlSettings(samples=2, prompts_per_rollout=4),
        TtrlSettings(
            samples=2, prompts_per_rollout=4, weight_decay=0.01, dual_clip=3, kl_ratio_weighted=False
        ),
    ):
        with pytest.raises(KeyboardInterrupt):
            adapt(Inputs(model, tok, spec, docs, settings, 0, tmp_path), Capture)
        model = model.unload() if hasattr(model, "unload") else model
    ours, theirs = given
    assert (ours.weight_decay, ours.delta, ours.use_bias_correction_kl) == (0.0, None, True)
    assert ours.epsilon == theirs.epsilon == 0.2
    assert (theirs.weight_decay, theirs.delta, theirs.use_bias_correction_kl) == (0.01, 3, False)
    keys = ("weight_decay", "dual_clip", "kl_ratio_weighted", "free_answer", "non_answers_vote")
    assert not set(keys) & set(recorded(TtrlSettings())), "the defaults would change the study's hashes"
    set_ = TtrlSettings(weight_decay=0.01, dual_clip=3, kl_ratio_weighted=False, free_answer="last")
    assert set(keys[:4]) <= set(recorded(set_))
    with pytest.raises(UserError, match=r"dual_clip 1.1 caps a loss the clipped ratio .* above 1.2"):
        TtrlSettings(dual_clip=1.1)
    theirs = TtrlSettings(samples=2, prompts_per_rollout=4, lr=0.05, weight_decay=0.01, dual_clip=3)
    theirs.kl_ratio_weighted = False  # and it trains: the adapter moved
    adapted = methods.find("test-time-rl").run(Inputs(model, tok, spec, docs, theirs, 0, tmp_path))
    assert adapted.record["moved"]["norm"] > 0 and adapted.record["steps"] == 4


def test_train_runs_it_with_its_settings_as_flags(tmp_path, tiny_llama, data_dir):
    """`answers` is its setting (how it samples), apart from train's `--leak` (train on the gold answers)."""
    from harness.cli.main import main, parser
    from harness.core.plumbing.settings import from_namespace

    out = tmp_path / "ttrl"
    argv = f"train --method test-time-rl --task ag_news --m 4 --n 4 --base {tiny_llama} --quantize none"
    argv = (
        argv + f" --data-dir {data_dir} --out {out} --samples 4 --prompts-per-rollout 4 --lr 0.05"
    ).split()
    free = parser(argv).parse_args([*argv, "--answers", "free"])
    assert from_namespace(TtrlSettings, free).answers == "free" and free.leak is False
    main([*argv, "--leak"])  # rewarded by the gold choice: a tiny model's votes are often unanimous
    record = json.loads((out / "tapt.json").read_text())
    assert record["method_settings"]["answers"] == "choices" and record["method_settings"]["samples"] == 4
    assert record["leak"] is True and record["rewards"] == "gold" and record["moved"]["norm"] > 0


def test_rollouts_that_would_leave_prompts_out_are_refused_naming_the_setting():
    s = TtrlSettings()
    assert (rollout_size(s, 32), rollout_size(s, 8), rollout_size(s, 5)) == (8, 8, 5)
    with pytest.raises(UserError, match=r"12 prompts .* prompts_per_rollout 8 \(TRL would leave 4 prompts"):
        rollout_size(s, 12)
    with pytest.raises(UserError, match="prompts_per_rollout .* multiple of prompts_per_update"):
        TtrlSettings(prompts_per_rollout=6, prompts_per_update=4)


def test_the_defaults_are_ttrls_kl_updates_and_schedule():
    s = TtrlSettings()
    assert (s.beta, s.prompts_per_rollout, s.prompts_per_update, s.warmup_ratio) == (0.001, 8, 1, 0.03)


def test_rewards_follow_the_vote_outside_the_leak_and_the_gold_choice_inside_it():
    """A planted policy whose samples are known: row 7's four samples vote Business (2 of 4); row 9's
    match no choice at all."""
    rows = [7, 7, 7, 7, 9, 9]
    samples = [" Business", " Sports", " Business", "?", " the", " a"]  # row 9 names none
    voted = Rewards({7: CHOICES, 9: CHOICES}, gold=None)
    assert voted(["p"] * 6, samples, row=rows) == [1.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    assert voted.votes == {7: 2, 9: None} and voted.unmatched == 3 and voted.samples == 6
    assert (voted.groups, voted.flat_groups, voted.learned) == (2, 1, {7})  # row 9: nothing to learn
    gold = Rewards({7: CHOICES, 9: CHOICES}, gold={7: 1, 9: 0})
    assert gold(["p"] * 6, samples, row=rows) == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]


def test_the_method_is_listed_with_its_settings():
    method = methods.find("test-time-rl")
    assert method.flows == ("zero_shot",) and method.settings().samples == 8


@pytest.mark.slow
def test_a_grid_unit_trains_it_without_the_labels_and_records_the_votes_against_them(
    tmp_path, tiny_llama, data_dir, monkeypatch
):
    import dataclasses

    from tapt.methods import test_time_rl

    seen, real = [], test_time_rl.METHOD
    adapt = real.adapt

    def watched(x):
        seen.append((x.labeled, "label" in x.docs))
        return adapt(x)

    monkeypatch.setattr(test_time_rl, "METHOD", dataclasses.replace(real, adapt=watched))
    settings = {"samples": 2, "prompts_per_rollout": 3, "temperature": 1.0}
    four = ["base", "extra", "test", "leak"]
    unit = one_unit(tmp_path, tiny_llama, data_dir, "test-time-rl", settings, conditions=four, exposure=False)
    assert seen == [(False, False), (False, False), (True, True)]  # the labels reach the leak only
    for cond in ("extra", "test", "leak"):
        rec = unit["training"][cond]
        assert rec["steps"] == 6 and len(rec["mean_reward"]) == 2  # 6 prompts: 2 rollouts of 3, 1 an update
        assert 0.0 <= rec["zero_advantage_share"] <= 1.0 and 0.0 <= rec["unmatched_share"] <= 1.0
        assert len(rec["votes"]) == 6 and rec["rewards"] == ("gold" if cond == "leak" else "majority vote")
        voted = [v for v in rec["votes"].values() if v is not None]
        assert rec["voted"] == len(voted)
        assert rec["label_accuracy"] is None if not voted else 0.0 <= rec["label_accuracy"] <= 1.0
        # the premise on a multiple-choice task: the base's greedy answer, kept on the choices' tokens as
        # the samples are, so always one of ag_news's 4 classes, on each of the 6 documents
        assert sorted(rec["greedy"].values()) and set(rec["greedy"].values()) <= {0, 1, 2, 3}
        assert rec["premise_documents"] == 6 and 0.0 <= rec["greedy_accuracy"] <= 1.0
    did = method_records(tmp_path / "out")  # what summarize and the report show, per condition
    assert list(did["condition"]) == ["extra", "test", "leak"] and list(did["model"].unique()) == [
        "tiny+test-time-rl"
    ]
    assert {"mean reward", "zero advantage", "unmatched", "learned from"} <= set(did.columns)
    voted_any = any(unit["training"][c]["voted"] for c in ("extra", "test", "leak"))
    assert (
        "label accuracy" in did.columns
    ) == voted_any  # a random tiny model's samples rarely name a choice
    assert "what each method did" in format_records(did)


def test_sampling_among_the_choices_keeps_a_completion_on_one_of_them_then_ends_it():
    from tapt.methods.test_time_rl.grpo_groups import allowed_next

    answers, end = [[5, 6, 7], [5, 8], [9]], 0
    assert allowed_next(answers, [], end) == [5, 9]
    assert allowed_next(answers, [5], end) == [6, 8] and allowed_next(answers, [5, 6], end) == [7]
    assert allowed_next(answers, [5, 8], end) == [end] and allowed_next(answers, [9], end) == [end]
    assert allowed_next([[5], [5, 6]], [5], end) == [end, 6]  # a choice that starts another may end or go on
    assert allowed_next(answers, [5, 8, end], end) == [end]  # ended: the end pads it


def test_a_choice_is_tokenized_as_the_continuation_lm_eval_scores(tiny_llama):
    from transformers import AutoTokenizer

    from tapt.methods.test_time_rl.votes import choice_tokens

    tok = AutoTokenizer.from_pretrained(tiny_llama)
    prompts = ["Which? ### Answer:", "Other text ### Answer:"]
    found = choice_tokens(tok, prompts, [CHOICES, CHOICES[:2]], " ")
    for prompt, names in zip(prompts, [CHOICES, CHOICES[:2]]):
        conts = found[tuple(tok(text=prompt)["input_ids"])]
        assert [tok.decode(c) for c in conts] == [" " + n for n in names]


@pytest.mark.parametrize("mode, unmatched", [("choices", 0.0), ("free", None)])
def test_every_sample_names_a_choice_by_default_and_free_text_need_not(
    mode, unmatched, tmp_path, tiny_llama, data_dir
):
    """A random tiny model's free text rarely names a class; sampled among the choices, every sample does,
    so its groups can disagree and teach."""
    settings = {"samples": 4, "prompts_per_rollout": 3, "answers": mode}
    unit = one_unit(
        tmp_path,
        tiny_llama,
        data_dir,
        "test-time-rl",
        settings,
        conditions=["base", "extra", "test"],
        exposure=False,
    )
    for cond in ("extra", "test"):
        rec = unit["training"][cond]
        assert rec["answers"] == mode and rec["with_answers"] is False  # the method's setting, the design's
        if unmatched is None:
            assert rec["unmatched_share"] > 0.5, rec["unmatched_share"]
        else:
            assert rec["unmatched_share"] == unmatched and rec["voted"] == 6
            assert rec["learned_from"] > 0 and rec["moved"]["norm"] > 0


def test_the_recipe_rows_that_say_the_same_are_the_settings_that_run_and_cite_their_line():
    from tapt.methods.test_time_rl.recipe import RECIPE

    rows = {line.split("  ")[0]: line for line in RECIPE.splitlines()[1:]}
    same = {"temperature": "1.0 (aime.sh:69)", "rollout": "8 prompts (aime.sh:25)"}
    for what, authors in same.items():
        assert authors in rows[what] and "the same" in rows[what]
    assert "cosine after 3% warm-up (aime.sh:61-62)" in rows["schedule"]
    s = TtrlSettings()
    assert (s.temperature, s.prompts_per_rollout, s.prompts_per_update, s.warmup_ratio) == (1.0, 8, 1, 0.03)
    assert s.answers == "choices" and "answers choices" in rows["sampling"]
    uncited = [w for w, line in rows.items() if not re.search(r"\.(sh|py|yaml):\d+", line)]
    assert len(rows) == 26 and not uncited, uncited  # the 23 of choices, and 3 of a generative task


def test_sampling_among_the_choices_is_refused_on_a_trainer_that_cannot_do_it(tmp_path, tiny_llama, data_dir):
    from trl import GRPOTrainer

    from harness.core.engine import models
    from harness.tasks.protocol import find_spec, subsample_docs
    from harness.tasks.subsample import SampleSettings
    from tapt.methods import Inputs
    from tapt.methods.test_time_rl import adapt

    spec = find_spec("ag_news")
    docs = subsample_docs(spec, SampleSettings(data_dir=str(data_dir), n=4, m=4), 0)["test"]
    model, tok = models.load_causal_lm(str(tiny_llama)), models.tokenizer(str(tiny_llama))
    x = Inputs(model, tok, spec, docs, TtrlSettings(samples=2, prompts_per_rollout=4), 0, tmp_path)
    with pytest.raises(UserError, match="choices samples through GroupedGRPOTrainer, not GRPOTrainer"):
        adapt(x, GRPOTrainer)


def test_the_grouped_trainer_runs_only_on_the_trl_private_surface_it_was_written_against(monkeypatch):
    """It overrides private GRPOTrainer methods; a TRL whose signatures moved is refused in one line."""
    from trl import GRPOTrainer

    from tapt.methods.test_time_rl import grpo_groups

    assert grpo_groups.trl_differs() == []  # the installed TRL is the tested one
    monkeypatch.setattr(GRPOTrainer, "_prepare_inputs", lambda self, batch, step: batch)
    assert grpo_groups.trl_differs() == ["_prepare_inputs('batch', 'step')"]
    with pytest.raises(
        UserError, match="written against TRL 1.16; TRL .* has _prepare_inputs.*Install trl==1.16"
    ):
        grpo_groups.GroupedGRPOTrainer()


def test_carried_on_through_a_stream_its_kl_reference_stays_the_base(tmp_path, tiny_llama, data_dir):
    """TRL copies the adapter it is given as the KL reference; on a later chunk that would be the adapter
    the earlier chunks trained. The first chunk's copy (B zero: the base's equal) stays the reference."""
    from harness.core.engine import models
    from harness.tasks.protocol import find_spec, subsample_docs
    from harness.tasks.subsample import SampleSettings
    from tapt.methods import Inputs
    from tapt.methods.test_time_rl import adapt

    spec = find_spec("ag_news")
    docs = subsample_docs(spec, SampleSettings(data_dir=str(data_dir), n=4, m=4), 0)["test"].drop(
        columns="label"
    )
    model, tok = models.load_causal_lm(str(tiny_llama)), models.tokenizer(str(tiny_llama))
    s = TtrlSettings(samples=2, prompts_per_rollout=2, lr=0.05)
    one = adapt(Inputs(model, tok, spec, docs[:2], s, 0, tmp_path / "a", online=True))
    two = adapt(Inputs(one.model, tok, spec, docs[2:], s, 0, tmp_path / "b", online=True))
    params = dict(two.model.named_parameters())
    ref_b = [p for n, p in params.items() if ".ref." in n and "lora_B" in n]
    trained_b = [p for n, p in params.items() if ".default." in n and "lora_B" in n]
    assert two.model is one.model and ref_b and all(float(p.abs().max()) == 0 for p in ref_b)
    assert max(float(p.abs().max()) for p in trained_b) > 0  # the adapter itself moved on
