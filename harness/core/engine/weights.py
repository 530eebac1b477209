"""A base model's weights, fingerprinted: a method must give the base back unchanged after each condition,
and the grid checks that it did instead of trusting it (a changed base would be scored as the next
condition's and the next unit's base without a word).

The fingerprint is a checksum of every parameter's and buffer's bytes, per name, computed where the
tensor lives: two integer sums of its bytes read as 32-bit words, one plain and one weighted by odd
weights. Integer sums are exact, so the same bytes give the same checksum on a CPU and on a GPU,
in any reduction order; one changed word always changes both sums. Written here because neither
torch nor safetensors hashes a tensor on the device; a cryptographic hash is not needed against a method
that is not an adversary.

A 4-bit (bitsandbytes) weight is read in a layout-free form: its 4-bit codes in the order they were
quantised and its block scales in bfloat16. On a CPU with AVX-512 BF16, bitsandbytes repacks a 4-bit
weight for its own kernel on the first forward pass in eval mode (new code order, scales dequantised to
bfloat16): the same weights in other bytes, which a checksum of the raw storage would read as a change.
Every base loaded by harness.core.engine.models.load_causal_lm has that repacking turned off, since an adapter
trained on a repacked base gets no gradient; a plug-in's own 4-bit layers may still be repacked, and
read the same.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


Fingerprint = dict[str, tuple]

COLUMNS = 1024  # the bytes are read as int32 words in rows of this many: a word's weight is its column's


def checksum(t: torch.Tensor) -> tuple[int, int]:
    """(plain sum, column-weighted sum) of the tensor's bytes, on its device: the bytes are read as int32
    words in rows of COLUMNS, each column summed exactly in int64 (no copy of the tensor is made), and the
    column sums weighted by odd weights in Python's integers; the bytes after the last whole row are
    summed one by one with their own weights."""
    import torch

    raw = t.detach().contiguous().reshape(-1).view(torch.uint8)
    body = raw.numel() // (4 * COLUMNS) * (4 * COLUMNS)
    columns = raw[:body].view(torch.int32).reshape(-1, COLUMNS).sum(0, dtype=torch.int64).tolist()
    tail = raw[body:].tolist()
    plain = sum(columns) + sum(tail)
    weighted = sum(c * (2 * i + 1) for i, c in enumerate(columns))
    weighted += sum(b * (2 * i + 1) for i, b in enumerate(tail, start=COLUMNS))
    return plain, weighted


def _four_bit_print(t) -> tuple:
    """A bitsandbytes 4-bit weight on the CPU: its codes in quantisation order and its scales in
    bfloat16, read the same before and after bitsandbytes repacks it (packing_format_for_cpu)."""
    import torch
    from bitsandbytes.functional import _convert_weight_packed_for_cpu_inverse, dequantize_blockwise

    state = t.quant_state
    rows, cols = state.shape[0], state.shape[1]
    if getattr(state, "packing_format_for_cpu", False):
        unpacked = copy.copy(state)  # the inverse rewrites the state it is given: a shallow copy's fields
        unpacked.original_nested = False  # the codes only: the scales are read below as they stand
        codes, _ = _convert_weight_packed_for_cpu_inverse(t.data, unpacked)
        scales = state.absmax  # bfloat16, (blocks, rows): as the repacking left them
    else:
        codes = t.data
        absmax = state.absmax
        if state.nested:  # the scales' own quantisation, undone as the repacking undoes it
            absmax = dequantize_blockwise(state.absmax, state.state2) + state.offset
        scales = absmax.float().reshape(rows, cols // state.blocksize).T.to(torch.bfloat16)
    return ("4bit", tuple(state.shape), checksum(codes.view(torch.uint8)), checksum(scales))


def _tensor_print(t: torch.Tensor) -> tuple:
    if getattr(t, "bnb_quantized", False) and getattr(t, "quant_state", None) is not None:
        return _four_bit_print(t)  # read on the parameter itself: detach() drops its quant_state
    return (str(t.dtype), tuple(t.shape), checksum(t))


def fingerprint(model: torch.nn.Module) -> Fingerprint:
    """Per parameter and buffer name: dtype, shape and a checksum of its values."""
    named = dict(model.named_parameters(remove_duplicate=True))
    named |= {f"buffer:{k}": v for k, v in model.named_buffers(remove_duplicate=True)}
    return {name: _tensor_print(t) for name, t in named.items()}


HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def hooks(model: torch.nn.Module) -> Fingerprint:
    """Per module with hooks registered on it: how many of each kind (forward, pre-forward, backward,
    pre-backward). A hook left on the base changes every later condition's outputs."""
    out = {}
    for name, module in model.named_modules():
        counts = tuple(len(getattr(module, kind, None) or {}) for kind in HOOKS)
        if any(counts):
            out[f"hooks on {name or 'the model'}"] = counts
    return out


def tokenizer_print(tokenizer) -> Fingerprint:
    """What scoring reads of a tokenizer: its size, its special tokens, its padding and truncation."""
    if tokenizer is None:
        return {}
    return {
        "tokenizer size": (len(tokenizer),),
        "tokenizer special tokens": tuple(sorted(map(str, tokenizer.all_special_tokens))),
        "tokenizer padding": (tokenizer.padding_side, str(tokenizer.pad_token)),
        "tokenizer truncation": (tokenizer.truncation_side,),
    }


def config_print(model: torch.nn.Module) -> Fingerprint:
    """The model's config, key by key (JSON-able values)."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "to_dict"):
        return {}
    return {f"config {k}": (repr(v),) for k, v in sorted(config.to_dict().items())}


def base_state(model: torch.nn.Module, tokenizer=None) -> Fingerprint:
    """Everything of a base that a method could leave changed: weights, hooks, tokenizer and config."""
    return fingerprint(model) | hooks(model) | tokenizer_print(tokenizer) | config_print(model)


def differences(before: Fingerprint, after: Fingerprint, most: int = 3) -> str:
    """What differs between two fingerprints, in words ('' when they are equal)."""
    changed = [k for k in before if k in after and before[k] != after[k]]
    missing, added = [k for k in before if k not in after], [k for k in after if k not in before]
    parts = []
    for what, names in (("changed", changed), ("missing", missing), ("added", added)):
        if names:
            shown = ", ".join(names[:most]) + (f", ... ({len(names)} in all)" if len(names) > most else "")
            parts.append(f"{what}: {shown}")
    return "; ".join(parts)


def movement(model: torch.nn.Module, at_load: Fingerprint) -> dict | None:
    """How far an adapted model moved from the base: for LoRA layers (PEFT), the Frobenius norm of the
    weight change their active adapters add (scaling * B @ A, over every layer) and how many add none (a
    frozen copy beside it, as TRL's GRPO keeps for its reference policy, is not counted); for a method
    that changed the base's own tensors in place, how many differ from the base as loaded. None where
    neither can be read (another kind of adapter)."""
    import torch

    norms = []
    for module in model.modules():
        lora_a, lora_b = getattr(module, "lora_A", None), getattr(module, "lora_B", None)
        if not isinstance(lora_a, torch.nn.ModuleDict) or not isinstance(lora_b, torch.nn.ModuleDict):
            continue
        active = getattr(module, "active_adapters", None) or list(lora_a)
        for name in (n for n in lora_a if n in active):
            a, b = lora_a[name].weight.detach().float(), lora_b[name].weight.detach().float()
            # |s B A|^2 = s^2 trace(B'B A A'): two rank-sized products instead of the full weight
            square = (b.T @ b * (a @ a.T)).sum() * module.scaling[name] ** 2
            norms.append(float(square.clamp(min=0)) ** 0.5)
    if norms:
        return {
            "norm": sum(x * x for x in norms) ** 0.5,
            "layers": len(norms),
            "unmoved_layers": sum(x == 0 for x in norms),
        }
    now = fingerprint(model)
    common = [k for k in now if k in at_load]
    if not common:
        return None
    return {"changed_tensors": sum(now[k] != at_load[k] for k in common)}


def did_not_move(moved: dict | None) -> bool:
    """Whether a movement record says the model is the base: no LoRA layer adds a weight change, or no
    tensor of the base changed. (Some layers alone may rightly stay put: a mixture-of-experts' expert
    that no training token was routed to; `unmoved_layers` records how many.)"""
    if moved is None:
        return False
    return moved.get("norm", 1) == 0 or moved.get("changed_tensors", 1) == 0


ADAPTER_KEYS = ("peft_type", "r", "lora_alpha", "target_modules", "lora_dropout", "bias")  # what it computes


def adapter_sha256(model) -> str | None:
    """SHA-256 of a PEFT model's adapter: its config's keys that change what it computes and every adapter
    tensor, by name, as float32 (the same adapter in training, saved, and loaded by lm-eval hashes the
    same). None for a model without a PEFT adapter."""
    import hashlib
    import json

    config = getattr(model, "peft_config", {}).get(getattr(model, "active_adapter", "default"))
    if config is None:
        return None
    from peft import get_peft_model_state_dict

    digest = hashlib.sha256()
    shown = {k: getattr(config, k, None) for k in ADAPTER_KEYS}
    shown = {k: sorted(v) if isinstance(v, set | list) else str(v) for k, v in shown.items()}
    digest.update(json.dumps(shown, sort_keys=True).encode())
    state = get_peft_model_state_dict(model)
    for name in sorted(state):
        digest.update(name.encode())
        digest.update(state[name].detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()
