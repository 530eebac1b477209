"""Scoring a unit's base and adapters together (score_together) gives the scores that scoring them one at a
time gives: each prompt under its own adapter. A forward of more rows moves float32 sums in their last
bits (the CPU's matrix kernels block by the rows), so log-probs agree to 1e-5, predictions exactly."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import torch
from helpers import TINY_GRID_DIR, tiny_grid_config, without_times
from transformers import LlamaForCausalLM

from harness.core.engine import adapters, loglik, models


def lora(model, seed: int):
    """A LoRA adapter over `model` whose every tensor is random (B too: it changes the scores)."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    for name, p in peft.named_parameters():
        if "lora_" in name:
            torch.nn.init.normal_(p, std=0.3)
    return peft


def test_each_row_is_scored_under_its_own_adapter_as_that_model_alone_scores_it(tiny_llama):
    tok = models.tokenizer(str(tiny_llama))
    head = "Classify the text as one of: negative, positive.\n\nText:"
    texts = [" a gripping, moving film", " dull", " the plot never comes together at all", " fine", " ok"]
    contexts = [tok(head + t)["input_ids"] for t in texts]
    conts = [[tok(" negative")["input_ids"], tok(" very positive")["input_ids"]] for _ in texts]
    how = {"batch_size": 2, "token_stats": True}
    base = LlamaForCausalLM.from_pretrained(tiny_llama).eval()
    alone = {adapters.BASE: loglik.score(base, contexts, conts, **how)}
    kept = {}
    for seed, name in enumerate(("extra", "test", "leak")):
        peft = lora(base, seed)
        alone[name] = loglik.score(peft, contexts, conts, **how)
        kept[name] = adapters.lone_lora(peft)
        base = peft.unload()
    model = adapters.put_on(base, kept)
    together = loglik.score_under(model, list(alone), contexts, conts, **how)
    for name, scored in alone.items():
        for ours, theirs in zip(together[name], scored):
            for field in ("token_logprobs", "token_mean", "token_std"):
                assert np.abs(getattr(ours, field) - getattr(theirs, field)).max() < 1e-5, (name, field)
            assert (
                np.abs(np.subtract(*(np.array([c[0] for c in x.choices]) for x in (ours, theirs)))).max()
                < 1e-5
            )
            assert [c[1] for c in ours.choices] == [c[1] for c in theirs.choices], name
    # the adapters differ far beyond that: a row read under another's adapter would not pass
    firsts = [scored[0].choices[0][0] for scored in alone.values()]
    assert min(abs(a - b) for i, a in enumerate(firsts) for b in firsts[i + 1 :]) > 0.01, firsts


def test_a_unit_scored_together_records_what_one_at_a_time_records(tiny_grid, tmp_path, tiny_llama, data_dir):
    """The tiny grid (one model at a time: the default) against its first subsample scored
    together: the same training records (the adapters' hashes, `moved`), exposure scores and accuracies
    to the bit, the same prediction for every document, class probabilities to 1e-6."""
    import harness

    out = tmp_path / "together"
    cfg = tiny_grid_config(tmp_path, tiny_llama, data_dir, out, subsamples=1, score_together=True)
    harness.run(cfg)
    alone, ours = (json.loads((d / TINY_GRID_DIR / "units/0.json").read_text()) for d in (tiny_grid, out))
    assert "score_base+extra+test+leak" in ours["seconds"] and "score_base" in alone["seconds"]
    assert alone["training"]["extra"]["moved"]["norm"] > 0 and ours["exposure"]
    ours, alone = without_times(ours), without_times(alone)
    assert ours.pop("settings") == {**alone.pop("settings"), "score_together": True}  # recorded: its own hash
    assert ours.pop("settings_hash") != alone.pop("settings_hash")
    code, code_alone = ours.pop("code"), alone.pop("code")  # the same code, another config: its own hash
    assert code["commit"] == code_alone["commit"] and code["config_hash"] != code_alone["config_hash"]
    for key in set(ours) | set(alone):
        assert ours[key] == alone[key], key
    a, b = (pd.read_parquet(d / TINY_GRID_DIR / "probabilities.parquet") for d in (tiny_grid, out))
    a = a[a["subsample"] == 0].reset_index(drop=True)
    assert a.drop(columns="probs").equals(b.drop(columns="probs")) and len(b) == 4 * 6
    assert np.abs(np.stack(a["probs"]) - np.stack(b["probs"])).max() < 1e-6
