"""The design's default base, 4-bit (QLoRA), through the grid: bitsandbytes repacks a 4-bit weight for its
CPU kernel on the first forward pass, and the base check reads that as the same weights; a 4-bit base a
method did change is still caught; every built-in zero-shot method (and the README's one-file example)
runs a whole unit with the leak on it and gives it back."""

from pathlib import Path

import pytest
import torch
from helpers import ALL_CONDITIONS, one_unit

from harness.core.engine import models, weights

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "norm_tuning.py"


def four_bit_layers(model):
    import bitsandbytes as bnb

    return [(n, m) for n, m in model.named_modules() if isinstance(m, bnb.nn.Linear4bit)]


def test_a_repacked_4bit_base_reads_unchanged_and_an_edited_one_changed(tiny_llama):
    from bitsandbytes.functional import _convert_weight_packed_for_cpu

    model = models.load_causal_lm(str(tiny_llama), "4bit")
    layers = four_bit_layers(model)
    assert len(layers) == 14  # 2 layers x 7 projections
    at_load = weights.fingerprint(model)
    for _, layer in layers:  # what bitsandbytes does on an AVX-512 BF16 CPU's first eval forward
        layer.weight.data, layer.weight.quant_state = _convert_weight_packed_for_cpu(
            layer.weight.data, layer.weight.quant_state
        )
    assert all(layer.weight.quant_state.packing_format_for_cpu for _, layer in layers)
    assert weights.differences(at_load, weights.fingerprint(model)) == ""
    name, layer = layers[0]
    layer.weight.data[0, 0] ^= 0x10  # one 4-bit code of the repacked weight
    assert weights.differences(at_load, weights.fingerprint(model)) == f"changed: {name}.weight"
    layer.weight.data[0, 0] ^= 0x10
    layers[1][1].weight.quant_state.absmax[0, 0] *= 2  # one block's scale
    assert weights.differences(at_load, weights.fingerprint(model)) == f"changed: {layers[1][0]}.weight"


def test_an_unpacked_4bit_weight_whose_code_changed_is_caught(tiny_llama):
    model = models.load_causal_lm(str(tiny_llama), "4bit")
    at_load = weights.fingerprint(model)
    name, layer = four_bit_layers(model)[-1]
    with torch.no_grad():
        layer.weight.data[-1] ^= 0x01
    assert weights.differences(at_load, weights.fingerprint(model)) == f"changed: {name}.weight"


@pytest.mark.slow
@pytest.mark.parametrize(
    "method, settings",
    [
        ("prompt-tapt", {}),
        ("test-time-learning", {"threshold": 0.0}),
        ("self-training", {}),
        ("test-time-rl", {"samples": 2, "prompts_per_rollout": 3}),
        (f"{EXAMPLE}:METHOD", {}),
    ],
)
def test_every_builtin_method_runs_a_4bit_unit_with_the_leak_and_gives_the_base_back(
    method, settings, tmp_path, tiny_llama, data_dir
):
    # the built-ins carry their adapter on through the stream (the 4-bit base under a carried adapter); the
    # example, which cannot carry, restarts from the base each chunk
    stream = (
        {"stream_mode": "restart", "stream_chunks": 3} if EXAMPLE.name in method else {"stream_chunk_size": 2}
    )
    unit = one_unit(tmp_path, tiny_llama, data_dir, method, settings, quantize="4bit", **stream)
    assert unit["settings"]["quantize"] == "4bit"
    assert all(0.0 <= unit[c] <= 1.0 for c in ALL_CONDITIONS)
    assert unit["training"]["stream"]["chunks"] == [2, 2, 2]
    assert unit["training"]["stream"].get("carried", False) == (EXAMPLE.name not in method)
