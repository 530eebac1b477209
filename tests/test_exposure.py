"""The exposure test: its permutation p-value, planted models that memorised the test split's text or
its answers, the base against itself, the cached scorer, the command line and its input errors."""

import itertools
import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import planted
from transformers import LlamaForCausalLM

from contamination import doc_scores
from contamination.exposure import exposure_test, two_sample
from contamination.exposure_run import ExposureArgs
from contamination.verdict import flags
from harness.cli.main import main
from harness.core.design.power import RESAMPLES
from harness.core.engine import loglik, models

N = 10  # test and extra documents: C(20, 10) = 184,756 splits, so p can fall far below 0.05


def test_permutation_pvalue_matches_brute_force_enumeration():
    test, extra = np.array([0.9, 0.6, 1.7]), np.array([0.1, -0.4, 0.5])
    pooled = np.concatenate([test, extra])
    observed = test.mean() - extra.mean()
    splits = list(itertools.combinations(range(6), 3))  # all 20 ways to pick the "test" half
    diffs = [pooled[list(s)].mean() - np.delete(pooled, list(s)).mean() for s in splits]
    result = two_sample(test, extra)
    assert result["p_test"] == pytest.approx(np.mean([d >= observed - 1e-12 for d in diffs]))
    assert result["p_extra"] == pytest.approx(np.mean([d <= observed + 1e-12 for d in diffs]))
    assert result["p_test"] == pytest.approx(1 / 20) and result["effect"] == pytest.approx(observed)
    assert result["ci_low"] < observed < result["ci_high"]


@pytest.fixture(scope="module")
def docs(data_dir):
    spec, docs, _ = ExposureArgs(task="rotten_tomatoes", n=N, m=4, data_dir=str(data_dir)).documents()
    return spec, docs


@pytest.fixture(scope="module")
def scored(tiny_llama, docs):
    spec, d = docs
    tokenizer = models.tokenizer(str(tiny_llama))
    base = LlamaForCausalLM.from_pretrained(tiny_llama).eval()
    return {
        "base": doc_scores.prompt_scores(base, tokenizer, spec, d),
        "text": doc_scores.prompt_scores(planted(tiny_llama, tokenizer, spec, d, False), tokenizer, spec, d),
        "answers": doc_scores.prompt_scores(
            planted(tiny_llama, tokenizer, spec, d, True), tokenizer, spec, d
        ),
    }


def test_a_model_that_memorised_the_test_text_is_flagged_for_text_not_labels(scored):
    result = exposure_test(scored["text"], scored["base"])
    assert flags(result) == {"text": True, "label": False, "confidence": False, "extra_text": False}
    assert result["text"]["p_test"] < 0.001 and result["label"]["p_test"] == 1.0
    assert result["text"]["ci_low"] > 0 and result["calibrated"]


def test_a_model_that_memorised_the_answers_too_is_flagged_for_both(scored):
    result = exposure_test(scored["answers"], scored["base"])
    assert flags(result)["text"] and flags(result)["label"]
    assert result["label"]["p_test"] < 0.001 and result["label"]["effect"] > 1.0


def test_the_base_against_itself_is_flagged_for_neither(scored):
    result = exposure_test(scored["base"], scored["base"])
    assert not any(flags(result).values())
    assert result["text"]["p_test"] == result["label"]["p_test"] == 1.0
    assert result["text"]["effect"] == result["text"]["ci_low"] == 0.0


def test_a_model_trained_on_its_own_answers_is_flagged_by_its_confidence_without_a_gold_label(
    tiny_llama, docs, scored
):
    """Self-training's and test-time RL's exposure: the base's own top choice memorised with test's texts.
    Its confidence in its own top choice rises on test's documents alone; the base and the model that
    memorised the text alone do not gain it."""
    spec, d = docs
    base = scored["base"][scored["base"]["split"] == "test"]
    own = np.where(base["margin"] > 0, base["label"], 1 - base["label"])  # two classes: the base's choice
    tokenizer = models.tokenizer(str(tiny_llama))
    model = planted(tiny_llama, tokenizer, spec, d, True, labels=own)
    result = exposure_test(doc_scores.prompt_scores(model, tokenizer, spec, d), scored["base"])
    assert result["confidence"]["p_test"] < 0.001 and result["confidence"]["effect"] > 0.5
    assert exposure_test(scored["base"], scored["base"])["confidence"]["p_test"] == 1.0
    assert exposure_test(scored["text"], scored["base"])["confidence"]["p_test"] > 0.05


def test_min_k_plus_plus_sees_the_memorised_text_too(scored):
    result = exposure_test(scored["text"], scored["base"], text_score="mink++")
    assert flags(result)["text"] and result["text_score"] == "mink++"


def test_the_scores_margin_is_lm_evals_class_log_odds(tiny_llama, docs, scored):
    """The label margin comes from the same class log-likelihoods as a full forward of prompt + class."""
    spec, d = docs
    tok = models.tokenizer(str(tiny_llama))
    model = LlamaForCausalLM.from_pretrained(tiny_llama).eval()
    doc = d.iloc[0]
    ll = []
    for name in spec.classes:
        ctx, cont = loglik.encode_pair(tok, doc["prompt"], " " + name)
        with torch.inference_mode():
            logp = torch.log_softmax(model(torch.tensor([ctx + cont])).logits[0].float(), -1)
        ll.append(sum(float(logp[len(ctx) - 1 + j, t]) for j, t in enumerate(cont)))
    y = int(doc["label"])
    assert scored["base"]["margin"].iloc[0] == pytest.approx(ll[y] - ll[1 - y], abs=1e-4)


def exposure_cli(tiny_llama, data_dir, *extra):
    args = f"contamination exposure --task rotten_tomatoes --n {N} --m 4 --data-dir {data_dir}"
    return main([*args.split(), "--base", str(tiny_llama), *extra])


def test_the_command_prints_the_verdict_and_writes_every_documents_scores(
    tiny_llama, data_dir, tmp_path, capsys
):
    exposure_cli(tiny_llama, data_dir, "--uncalibrated", "--out", str(tmp_path / "r.json"))
    shown = capsys.readouterr().out
    assert "UNCALIBRATED" in shown and "text of test:" in shown and "labels of test:" in shown
    result = json.loads((tmp_path / "r.json").read_text())
    assert len(result["documents"]["suspect"]["row"]) == 2 * N and "reference" not in result["documents"]
    assert result["settings"]["n"] == N and result["calibrated"] is False


def test_the_command_runs_codec_by_default_under_the_suspect_and_the_base_with_a_context_per_document(
    tiny_llama, data_dir, tmp_path, capsys
):
    exposure_cli(tiny_llama, data_dir, "--out", str(tmp_path / "r.json"))  # k 1, the authors', by default
    shown = capsys.readouterr().out
    assert "CoDeC:" in shown and "codec_base" in shown
    result = json.loads((tmp_path / "r.json").read_text())
    for who in ("suspect", "reference"):
        drops = result["documents"][who]["codec"]
        assert len(drops) == 2 * N and all(np.isfinite(drops))
    assert {"p_test", "share_test"} <= set(result["codec"]) and result["settings"]["codec_context"] == 1
    # the suspect is the base here (no adapter): its CoDeC and the base's are the same numbers
    assert result["codec"]["p_test"] == result["codec_base"]["p_test"]
    with pytest.raises(SystemExit, match="--codec-context 1 runs CoDeC on prompts: pass --format prompt"):
        exposure_cli(tiny_llama, data_dir, "--codec-context", "1", "--format", "raw")
    exposure_cli(tiny_llama, data_dir, "--codec-context", "0", "--out", str(tmp_path / "off.json"))
    assert "codec" not in json.loads((tmp_path / "off.json").read_text())


def test_bad_inputs_are_refused_before_scoring(tiny_llama, tiny_bert, data_dir, tmp_path):
    with pytest.raises(SystemExit, match="cannot reach p <= 0.05.*raise --n to at least 3"):
        main(f"contamination exposure --task rotten_tomatoes --n 2 --m 4 --data-dir {data_dir}".split())
    with pytest.raises(SystemExit, match="exceeds the pool"):
        exposure_cli(tiny_llama, data_dir, "--n", "100000")
    other = tmp_path / "other_tokenizer"
    shutil.copytree(tiny_llama, other)
    for f in other.glob("tokenizer*"):
        f.unlink()
    models.tokenizer(str(tiny_bert)).save_pretrained(other)
    with pytest.raises(SystemExit, match="--checkpoint .*its tokenizer differs from --base"):
        exposure_cli(tiny_llama, data_dir, "--checkpoint", str(other))
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "org/other-model"}))
    with pytest.raises(SystemExit, match="was trained on 'org/other-model'"):
        exposure_cli(tiny_llama, data_dir, "--peft", str(adapter))
    (adapter / "adapter_config.json").write_text("{not json")
    with pytest.raises(SystemExit, match="adapter_config.json: not valid JSON .*re-save the adapter"):
        exposure_cli(tiny_llama, data_dir, "--peft", str(adapter))
    with pytest.raises(SystemExit, match="is an encoder; pass --format raw"):
        exposure_cli(tiny_bert, data_dir, "--uncalibrated")


def test_an_encoders_raw_text_scores_under_a_fixed_mask(tiny_bert, docs):
    spec, d = docs
    from transformers import BertForMaskedLM

    model, tok = BertForMaskedLM.from_pretrained(tiny_bert), models.tokenizer(str(tiny_bert))
    first = doc_scores.raw_scores(model, tok, d, masked=True, seed=0)
    again = doc_scores.raw_scores(model, tok, d, masked=True, seed=0)
    pd.testing.assert_frame_equal(first, again)  # the same mask every time: the reference is comparable
    assert exposure_test(first, again)["text"]["p_test"] == 1.0
    assert np.isfinite(first[["text", "mink", "margin"]].to_numpy()).all()


def test_a_grid_unit_scores_test_and_extra_for_the_exposure_test_in_one_pass_of_their_own(
    tiny_llama, data_dir, tmp_path, monkeypatch
):
    """The exposure test compares test's documents with extra's, so one code path scores both: each
    condition's exposure pass runs all 12 (6 a split) together, none read from lm-eval's scoring pass."""
    from helpers import one_unit

    run, passes = loglik.score, []

    def counted(model, contexts, *args, **kw):
        if kw.get("token_stats"):  # the exposure pass's call (lm-eval's and CoDeC's keep no statistics)
            passes.append(len(contexts))
        return run(model, contexts, *args, **kw)

    monkeypatch.setattr(loglik, "score", counted)
    unit = one_unit(tmp_path, tiny_llama, data_dir, "prompt-tapt", {}, conditions=["base", "extra", "test"])
    assert passes == [12, 12, 12]  # base, extra and test: the 6 test and 6 extra documents each time
    assert sorted(set(unit["exposure"]["docs"]["split"])) == ["extra", "test"]


def test_the_command_scores_chat_prompts_through_the_bases_template(tiny_llama, data_dir, tmp_path):
    exposure_cli(
        tiny_llama, data_dir, "--prompt-format", "chat", "--uncalibrated", "--out", str(tmp_path / "r.json")
    )
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["settings"]["prompt_format"] == "chat"
    assert result["settings"]["chat_model"] == str(tiny_llama)
    exposure_cli(tiny_llama, data_dir, "--uncalibrated", "--out", str(tmp_path / "plain.json"))
    plain = json.loads((tmp_path / "plain.json").read_text())
    assert result["documents"]["suspect"]["row"] == plain["documents"]["suspect"]["row"]
    assert result["documents"]["suspect"]["text"] != plain["documents"]["suspect"]["text"]  # other prompts
    with pytest.raises(SystemExit, match="--prompt-format chat renders a subsample's prompts"):
        exposure_cli(
            tiny_llama,
            data_dir,
            "--prompt-format",
            "chat",
            "--suspect-split",
            "train",
            "--reference-split",
            "train",
        )


@pytest.mark.parametrize("n", [3, 6, 10])  # every split (20, 924), and a sampled null (184,756 splits)
def test_both_sides_from_one_null_are_scipys_two_tests_exactly(n):
    from scipy import stats

    rng = np.random.default_rng(n)
    for draw in range(30):
        test, extra = rng.normal(size=n), rng.normal(size=n)
        if draw % 3 == 0:  # ties: the scores of a few distinct values
            test, extra = np.round(test), np.round(extra)
        lower = stats.permutation_test(
            (test, extra), lambda x, y, axis=-1: np.mean(x, axis=axis) - np.mean(y, axis=axis),
            permutation_type="independent", alternative="less", n_resamples=RESAMPLES, vectorized=True,
            rng=np.random.default_rng(0),
        )  # fmt: skip
        assert two_sample(test, extra)["p_extra"] == lower.pvalue  # bit for bit
