"""CoDeC: a document's likelihood with other documents of its set before it. A tiny Llama trained to
memorise the test split loses likelihood on those documents when context is added, where the untrained
model does not; the context documents are drawn from the document's own split, never itself."""

import numpy as np
import pytest
import torch
from transformers import LlamaForCausalLM

from contamination import codec, doc_scores
from contamination.exposure import codec_test
from contamination.exposure_run import ExposureArgs
from harness.core.engine import models
from harness.grid.configuration import resolve

K = 3  # context documents


@pytest.fixture(scope="module")
def docs(data_dir):
    spec, docs, _ = ExposureArgs(task="rotten_tomatoes", n=10, m=4, data_dir=str(data_dir)).documents()
    return spec, docs


def memorised(tiny_llama, tokenizer, prompts: list[str], steps: int = 60) -> LlamaForCausalLM:
    """The tiny Llama trained on `prompts`, each read from its start, all of them each step."""
    torch.manual_seed(0)
    model = LlamaForCausalLM.from_pretrained(tiny_llama)
    ids = [torch.tensor([tokenizer(p)["input_ids"]]) for p in prompts]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        opt.zero_grad()
        (sum(model(input_ids=x, labels=x).loss for x in ids) / len(ids)).backward()
        opt.step()
    return model.eval()


def test_a_model_trained_to_memorise_a_split_loses_likelihood_on_it_when_context_is_added(tiny_llama, docs):
    spec, d = docs
    tokenizer = models.tokenizer(str(tiny_llama))
    test_prompts = list(d.loc[d["split"] == "test", "prompt"])
    scored = {
        "untrained": doc_scores.prompt_scores(
            LlamaForCausalLM.from_pretrained(tiny_llama).eval(), tokenizer, spec, d, codec_context=K
        ),
        "memorised": doc_scores.prompt_scores(
            memorised(tiny_llama, tokenizer, test_prompts), tokenizer, spec, d, codec_context=K
        ),
    }
    on_test = d["split"].to_numpy() == "test"
    drop = {name: s["codec"].to_numpy() for name, s in scored.items()}
    text = scored["memorised"]["text"].to_numpy()
    assert text[on_test].mean() > text[~on_test].mean() + 1.0  # it learned them (nats a token)
    # nearly every memorised document falls with context (all of them here; 9 of 10 on a host with AVX-512
    # BF16, whose kernels round otherwise: the margin is 8 of 10), by far more than under the untrained model
    assert codec.share(drop["memorised"][on_test]) >= 0.8
    assert drop["memorised"][on_test].mean() > drop["untrained"][on_test].mean() + 0.3
    result = codec_test(scored["memorised"])  # and more than the unseen extra documents do
    assert result["share_test"] >= 0.8 and result["p_test"] < 0.05
    assert not scored["untrained"]["codec"].isna().any()


def test_a_blocks_context_comes_from_its_own_split_outside_the_block_and_is_drawn_once_per_block():
    groups = np.array(["test"] * 20 + ["extra"] * 5)
    rows = list(range(100, 125))
    got = codec.blocks(groups, rows, 3, seed=0, block=8)
    assert [b for b, _ in got] == [list(range(0, 8)), list(range(8, 16)), list(range(16, 20)), [20, 21]] + [
        [22, 23],
        [24],
    ]  # blocks of 8 a split; a split of 5 leaves k documents outside each block
    for block, chosen in got:
        assert len(chosen) == 3 and not set(chosen) & set(block)
        assert all(groups[j] == groups[block[0]] for j in chosen)
    assert got == codec.blocks(groups, rows, 3, 0, 8) and got != codec.blocks(groups, rows, 3, 1, 8)


def test_by_default_each_document_draws_its_own_context_as_the_authors_do():
    groups = np.array(["test"] * 20 + ["extra"] * 5)
    got = codec.blocks(groups, list(range(100, 125)), 1, seed=0)
    assert [b for b, _ in got] == [[i] for i in range(25)]  # one document a draw
    assert all(j != b[0] and groups[j] == groups[b[0]] for b, (j,) in got)
    assert len({j for b, (j,) in got[:20]}) > 8  # the test documents' contexts are not a few shared ones


@pytest.mark.parametrize("block", [1, 8])
def test_a_block_read_from_one_cache_gives_each_documents_own_drop(block, tiny_llama, docs):
    """Every document of a block scored on its own (context + document, nothing shared) gives the drop
    the block's shared pass gives; a block of 1 is a context per document."""
    from harness.core.engine import loglik

    spec, d = docs
    tokenizer = models.tokenizer(str(tiny_llama))
    model = LlamaForCausalLM.from_pretrained(tiny_llama).eval()
    scored = doc_scores.prompt_scores(model, tokenizer, spec, d, codec_context=1, codec_block=block)
    ctx = [tokenizer(p)["input_ids"] for p in d["prompt"]]
    groups, rows = d["split"].to_numpy(), d["row"].to_numpy()
    sep = tokenizer(codec.SEPARATOR, add_special_tokens=False)["input_ids"]
    start, end = loglik.shared_prefix(ctx), codec.shared_suffix(ctx)
    alone = loglik.score(model, ctx, None, share_prefix=False)
    cut = int(ctx[0][0] == tokenizer.bos_token_id)  # the document's BOS, if its tokenizer adds one
    for members, (j,) in codec.blocks(groups, rows, 1, 0, block):
        for i in members:
            whole = loglik.score(model, [ctx[j] + sep + ctx[i][cut:]], None, share_prefix=False)[0]
            a, b = codec.span(start, len(ctx[i]) - end)
            offset = len(ctx[j]) + len(sep) - cut
            own = np.mean(alone[i].token_logprobs[a - 1 : b - 1])
            drop = own - np.mean(whole.token_logprobs[offset + a - 1 : offset + b - 1])
            assert abs(drop - scored["codec"].iloc[i]) < 1e-4


def test_the_scored_span_is_the_documents_own_text_cut_as_the_authors_cut_it():
    assert codec.shared_suffix([[1, 2, 8, 9], [3, 8, 9], [5, 6, 7, 8, 9]]) == 2
    assert codec.span(4, 30) == (14, 29)  # own tokens 4..29: skip the first 10, drop the last
    assert codec.span(4, 12) == (10, 11)  # short: at least one token before the last stays
    assert codec.span(4, 5) == (4, 5)  # one own token: it is the span


def test_without_codec_context_the_scores_have_no_codec_and_the_record_keeps_its_old_form(tiny_llama, docs):
    from contamination.exposure import condition_tests

    spec, d = docs
    tokenizer = models.tokenizer(str(tiny_llama))
    s = doc_scores.prompt_scores(LlamaForCausalLM.from_pretrained(tiny_llama).eval(), tokenizer, spec, d)
    assert s["codec"].isna().all()
    record = condition_tests({"base": s, "test": s}, "base", "loss")
    assert (
        set(record["scores"]["test"]) == {"text", "mink", "margin", "confidence"}
        and "codec" not in record["tests"]["test"]
    )


def test_codec_context_is_a_grid_key_that_needs_the_exposure_test_and_changes_the_hash_only_when_on(
    tmp_path, tiny_llama, data_dir
):
    from helpers import tiny_grid_config

    from harness.core.plumbing.errors import SettingsError
    from harness.grid.configuration.config import load_config

    plain = load_config(tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out"))
    on = load_config(tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out", codec_context=3))
    assert "codec_context" not in resolve.recorded(plain) and resolve.recorded(on)["codec_context"] == 3
    assert resolve.settings_hash(plain) != resolve.settings_hash(on)
    with pytest.raises(SettingsError, match="key 'codec_context' .*set exposure: true"):
        load_config(
            tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "o", exposure=False, codec_context=3)
        )


def test_the_summary_shows_codecs_flag_share_beside_the_exposure_tests_where_the_grid_ran_it():
    from harness.stats.summary.exposure_summary import format_exposure

    cell = {"m": 8, "n": 8, "model": "lm", "task": "trec", "units": 5}
    test = {"text": 1.0, "label": 0.0, "codec": 0.6}
    extra = {"text": 0.0, "label": 0.0, "extra_text": 1.0, "codec": 0.0}
    lines = format_exposure([{**cell, "test": test, "extra": extra}], {"tasks": []}).splitlines()
    assert lines[1].count("CoDeC") == 2 and "60%" in lines[2]
    test.pop("codec"), extra.pop("codec")
    plain = format_exposure([{**cell, "test": test, "extra": extra}], {"tasks": []})
    assert "CoDeC" not in plain


def test_calibrate_takes_codec_context_from_a_config_without_the_exposure_key(tmp_path, tiny_llama, data_dir):
    """calibrate runs every grid with the exposure test on, so its configs need not say so: the first
    error here is the bad mode, not codec_context."""
    from helpers import tiny_grid_config

    from harness.cli.main import main

    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "cal", exposure=False)
    with pytest.raises(SystemExit, match="--modes must be some of"):
        main(f"contamination calibrate --config {config} --codec-context 2 --modes sideways".split())
    assert not (tmp_path / "cal").exists()


def test_codecs_recipe_names_the_notebook_cell_each_row_was_read_from_and_the_short_text_rule():
    from contamination.codec import RECIPE

    rows = {line.split("  ")[0]: line for line in RECIPE.splitlines()[1:]}
    assert len(rows) == 8 and all("(cell" in line for line in rows.values())
    assert "12 tokens or fewer, a BOS included: dropped" in rows["short text"]


def test_drops_that_share_a_context_are_tested_by_block_and_hold_their_level():
    """Blocks of 8 whose drops share a shift (one context each), test and extra alike: the block test flags
    at most its level; the document test, which counts 32 independent drops a side, flags far more."""
    from contamination.exposure import two_sample

    rng, blocks = np.random.default_rng(0), np.repeat(np.arange(4), 8)
    flagged = {"block": 0, "document": 0}
    for i in range(100):
        test, extra = (np.repeat(rng.normal(0, 1, 4), 8) + rng.normal(0, 0.3, 32) for _ in range(2))
        flagged["block"] += codec.block_test(test, extra, blocks, blocks, seed=i)["p_test"] <= 0.05
        if i < 40:
            flagged["document"] += two_sample(test, extra, seed=i)["p_test"] <= 0.05
    assert flagged["block"] <= 10  # 5% of 100, with room for chance (binomial: P(> 10) < 0.02)
    assert flagged["document"] >= 6  # 15% of 40, where it holds 5%


def test_a_block_test_moves_whole_blocks_and_reads_a_clear_difference():
    blocks = np.repeat(np.arange(4), 8)
    r = codec.block_test(np.full(32, 1.0), np.zeros(32), blocks, blocks)
    assert r["blocks"] == 8 and r["p_test"] == pytest.approx(1 / 70) and r["p_extra"] == 1.0  # C(8, 4)
    uneven = codec.block_test(
        np.arange(20.0), np.arange(12.0), np.repeat([0, 1, 2], [8, 8, 4]), np.repeat([0, 1], [8, 4])
    )
    assert uneven["blocks"] == 5 and 0 < uneven["p_test"] <= 1


def test_a_grid_with_blocks_records_them_and_tests_codec_by_block(tiny_llama, docs):
    from contamination.exposure import condition_tests

    spec, d = docs
    tokenizer = models.tokenizer(str(tiny_llama))
    model = LlamaForCausalLM.from_pretrained(tiny_llama).eval()
    s = doc_scores.prompt_scores(model, tokenizer, spec, d, codec_context=1, codec_block=4)
    record = condition_tests({"base": s, "test": s}, "base", "loss")
    assert record["scores"]["test"]["codec_block"] == list(
        codec.block_ids(d["split"].to_numpy(), d["row"].to_numpy(), 1, 4)
    )
    test = record["tests"]["test"]["codec"]
    assert test["blocks"] == len(set(zip(d["split"], record["scores"]["test"]["codec_block"])))
    assert np.isnan(test["detectable"])  # a document-level figure, not given where documents share contexts
