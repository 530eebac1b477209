"""Where users run it: bf16 (a GPU's default, `--bf16` on a CPU), a base that moves between devices, and
the 4-bit default on a CPU, whose adapters must learn after the base was scored. Every adapted condition
records how far its model moved, and one that did not move is refused."""

from pathlib import Path

import pytest
import torch
from helpers import ALL_CONDITIONS, one_unit

from harness.core.engine import models, weights
from harness.core.plumbing.errors import UserError
from tapt import methods

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "norm_tuning.py"

METHODS = [
    ("prompt-tapt", {}),
    ("test-time-learning", {"threshold": 0.0}),
    ("self-training", {}),
    ("test-time-rl", {"samples": 2, "prompts_per_rollout": 3}),
]


@pytest.mark.slow
@pytest.mark.parametrize("method, settings", METHODS, ids=[m for m, _ in METHODS])
def test_every_method_runs_a_bf16_unit_with_the_leak_stream_exposure_and_codec(
    method, settings, tmp_path, tiny_llama, data_dir
):
    unit = one_unit(tmp_path, tiny_llama, data_dir, method, settings, bf16=True, codec_context=1)
    assert unit["settings"]["bf16"] is True  # recorded for every method: the base loads in bf16
    assert all(0.0 <= unit[c] <= 1.0 for c in ALL_CONDITIONS)
    # every adapted model moved, or its method learned from nothing and the unit says so (test-time RL on
    # a random model: no sample names a class, so every reward is equal)
    stuck = unit.get("not_adapted", {})
    for cond in ("extra", "test", "leak"):
        moved = unit["training"][cond]["moved"]["norm"]
        assert moved > 0 or (method == "test-time-rl" and stuck[cond] == "learned from 0 documents"), cond
    for chunk in unit["training"]["stream"]["per_chunk"]:
        assert chunk["moved"]["norm"] > 0 or (method == "test-time-rl" and chunk["learned_from"] == 0)
    if method != "test-time-rl":  # the stream's one adapted chunk learned from 3 documents: in bf16 a small
        # update (TLM: lr 5e-5, 3 steps) can leave every score as the base's; its adapter moved (above)
        assert set(stuck) <= {"stream"} and stuck.get("stream", "scores").startswith("scores")
    exposure = unit["exposure"]
    assert set(exposure["tests"]) == {"base", "extra", "test", "leak"}
    codec = [x for cond in ("base", "test") for x in exposure["scores"][cond]["codec"]]
    assert len(codec) == 4 * 6 and all(isinstance(x, float) for x in codec)  # CoDeC ran: no NaN (null)


@pytest.mark.slow
def test_the_norm_tuning_example_moves_a_bf16_base_and_gives_it_back(tmp_path, tiny_llama, data_dir):
    # a GPU loads the base's norms in bf16 (a 4-bit base's too): there a step of 1e-3 on a weight of 1.0 is
    # under half of bf16's spacing, so the example trains them in float32 and puts the bf16 ones back
    unit = one_unit(tmp_path, tiny_llama, data_dir, f"{EXAMPLE}:METHOD", {}, bf16=True, stream_mode="restart")
    for cond in ("extra", "test", "leak"):
        assert unit["training"][cond]["moved"]["changed_tensors"] > 0, cond


def test_bf16_loads_the_base_in_bf16(tiny_llama):
    model = models.load_causal_lm(str(tiny_llama), bf16=True)
    assert model.dtype == torch.bfloat16 and model.device == models.device()


def test_a_bf16_model_scores_to_float32_arrays_with_bf16_log_softmax(tiny_llama):
    from transformers import AutoModelForCausalLM

    from harness.core.engine import loglik

    model = AutoModelForCausalLM.from_pretrained(tiny_llama, dtype=torch.bfloat16)
    tok = models.tokenizer(str(tiny_llama))
    ids = [tok("a b c d e")["input_ids"], tok("a b c f")["input_ids"]]
    # softmax_dtype None: lm-eval's HFLM default, the logits' own dtype (bf16 on a GPU)
    scored = loglik.score(model, ids, [[[5], [6, 7]], [[5]]], token_stats=True, softmax_dtype=None)
    assert scored[0].token_logprobs.dtype == scored[0].token_mean.dtype == "float32"
    assert len(scored[0].token_logprobs) == len(ids[0]) - 1
    assert len(scored[0].choices) == 2 and all(isinstance(total, float) for total, _ in scored[0].choices)


def one_value_changed(model, at_load) -> str:
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight[3, 5] += 1e-3
    return weights.differences(at_load, weights.fingerprint(model))


def test_a_fingerprint_reads_the_same_after_a_layout_move_and_differs_after_one_value(tiny_llama):
    model = models.load_causal_lm(str(tiny_llama))
    at_load = weights.fingerprint(model)
    layer = model.model.layers[0].mlp.up_proj  # the same values in a new tensor, through a transposed copy
    layer.weight.data = layer.weight.data.T.clone().T.contiguous()
    assert weights.differences(at_load, weights.fingerprint(model)) == ""
    assert one_value_changed(model, at_load) == "changed: model.layers.1.mlp.down_proj.weight"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="moves the model between the CPU and a GPU")
def test_a_fingerprint_reads_the_same_on_the_cpu_and_the_gpu_and_differs_after_one_value(tiny_llama):
    model = models.load_causal_lm(str(tiny_llama))  # on the GPU, from load
    at_load = weights.fingerprint(model)
    assert weights.differences(at_load, weights.fingerprint(model.to("cpu"))) == ""
    assert weights.differences(at_load, weights.fingerprint(model.to("cuda"))) == ""
    assert one_value_changed(model, at_load) == "changed: model.layers.1.mlp.down_proj.weight"


def test_a_checksum_is_exact_integer_sums_of_the_bytes_wherever_they_are():
    t = torch.randn(1000, 37, dtype=torch.bfloat16)  # not a whole number of rows: a tail is read too
    plain, weighted = weights.checksum(t)
    raw = t.view(torch.uint8).reshape(-1)
    assert plain == sum(raw[: raw.numel() // 4096 * 4096].view(torch.int32).tolist()) + sum(
        raw[raw.numel() // 4096 * 4096 :].tolist()
    )
    u = t.clone()
    u.view(-1)[-1] = u.view(-1)[-1] + 1  # one value in the tail
    v = t.clone()
    v.view(-1)[0], v.view(-1)[1] = t.view(-1)[1], t.view(-1)[0]  # two values swapped in one word
    assert len({weights.checksum(x) for x in (t, u, v)}) == 3
    if torch.cuda.is_available():
        assert weights.checksum(t.cuda()) == (plain, weighted)


def four_bit_lora_grads(path, evaluated: bool) -> dict[str, torch.Tensor]:
    """The LoRA A gradients of one training step on the 4-bit base, after an eval forward pass or not."""
    from peft import LoraConfig, get_peft_model

    model = models.load_causal_lm(str(path), "4bit")
    ids = models.tokenizer(str(path))(["the quick brown fox jumps over it"], return_tensors="pt")["input_ids"]
    if evaluated:  # what the grid does first: score the base
        model.eval()
        with torch.no_grad():
            model(ids)
        packed = [m.weight.quant_state for m in model.modules() if hasattr(m, "support_avx512bf16_for_cpu")]
        assert packed and not any(getattr(s, "packing_format_for_cpu", False) for s in packed)
    torch.manual_seed(0)
    peft = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear", lora_dropout=0.0))
    for name, p in peft.named_parameters():
        if "lora_B" in name:  # B starts at zero: a non-zero B lets A's gradient through
            torch.nn.init.normal_(p, std=0.1)
    peft.train()
    peft(ids, labels=ids).loss.backward()
    return {n: p.grad for n, p in peft.named_parameters() if "lora_A" in n}


def test_a_4bit_base_scored_first_still_passes_gradients_to_every_lora_layer(tiny_llama):
    never, after_eval = four_bit_lora_grads(tiny_llama, False), four_bit_lora_grads(tiny_llama, True)
    names = list(never)
    for name in (names[0], names[-1]):  # the first layer and the last
        assert after_eval[name] is not None and after_eval[name].abs().sum() > 0, name
        torch.testing.assert_close(after_eval[name], never[name], rtol=1e-3, atol=1e-6)


def test_a_method_that_learned_yet_did_not_move_is_refused_naming_it_and_the_condition(tiny_llama):
    from harness.tasks.protocol import find_spec

    def adapt(x):  # says it took steps, returns the base with a LoRA that never trained
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(x.model, LoraConfig(r=2, target_modules=["q_proj"]))
        return methods.Adapted(model, {"steps": 3, "learned_from": len(x.docs)})

    frozen = methods.Method("frozen", ("zero_shot",), methods.Settings, adapt)
    base = models.load_causal_lm(str(tiny_llama))
    import pandas as pd

    docs = pd.DataFrame({"text": ["a", "b"], "row": [0, 1]})
    x = methods.Inputs(base, None, find_spec("ag_news"), docs, methods.Settings(), 0, tiny_llama)
    with pytest.raises(
        UserError,
        match=r"method frozen \(built in\) did not move its model in the leak "
        r"condition: after 3 optimizer steps on 2 documents none of its 2 LoRA layers adds a weight "
        r"change",
    ):
        frozen.run(x, condition="leak")


@pytest.mark.slow
def test_a_4bit_unit_scored_before_it_trains_moves_every_adapter_and_its_leak_changes_the_scores(
    tmp_path, tiny_llama, data_dir
):
    four = ["base", "extra", "test", "leak"]
    unit = one_unit(tmp_path, tiny_llama, data_dir, "prompt-tapt", {}, quantize="4bit", conditions=four)
    assert "not_adapted" not in unit
    for cond in ("extra", "test", "leak"):
        moved = unit["training"][cond]["moved"]
        assert moved["norm"] > 0 and moved["unmoved_layers"] == 0, cond
    import pandas as pd

    (probs,) = (tmp_path / "out").rglob("probabilities.parquet")
    by = pd.read_parquet(probs).set_index(["condition", "row"])["probs"]
    moved_most = max(abs(a - b) for x, y in zip(by["base"], by["leak"]) for a, b in zip(x, y))
    assert moved_most > 1e-3  # the leak's class probabilities are not the base's


def test_movement_counts_the_active_adapter_not_a_frozen_copy_beside_it(tiny_llama):
    """TRL's GRPO keeps a frozen "ref" copy of the adapter for its reference policy: it never moves."""
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(
        models.load_causal_lm(str(tiny_llama)), LoraConfig(r=2, target_modules="all-linear")
    )
    model.add_adapter("ref", model.peft_config["default"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B.default" in name:
                p.normal_()
    moved = weights.movement(model, {})
    assert moved["layers"] == 14 and moved["unmoved_layers"] == 0 and moved["norm"] > 0
    assert not weights.did_not_move(moved)
