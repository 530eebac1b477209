"""A base model's weights, fingerprinted: a method must give the base back unchanged after each condition,
and the grid checks that it did instead of trusting it (a changed base would be scored as the next
condition's and the next unit's base without a word).

The fingerprint is a CRC-32 of every parameter's and buffer's bytes, per name (zlib's CRC runs at
memory speed; a cryptographic hash is not needed against a method that is not an adversary). Tensors
on an accelerator are summed there instead of copied to the host.

A 4-bit (bitsandbytes) weight is read in a layout-free form: its 4-bit codes in the order they were
quantised and its block scales in bfloat16. On a CPU with AVX-512 BF16, bitsandbytes repacks a 4-bit
weight for its own kernel on the first forward pass in eval mode (new code order, scales dequantised to
bfloat16): the same weights in other bytes, which a CRC of the raw storage would read as a change.
"""

from __future__ import annotations

import copy
import zlib

import torch

Fingerprint = dict[str, tuple]


def _crc(t: torch.Tensor) -> int:
    return zlib.crc32(t.detach().contiguous().reshape(-1).view(torch.uint8).numpy())


def _four_bit_print(t) -> tuple:
    """A bitsandbytes 4-bit weight on the CPU: its codes in quantisation order and its scales in
    bfloat16, read the same before and after bitsandbytes repacks it (packing_format_for_cpu)."""
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
    return ("4bit", tuple(state.shape), _crc(codes.view(torch.uint8)), _crc(scales.contiguous()))


def _tensor_print(t: torch.Tensor) -> tuple:
    if t.device.type != "cpu":  # no host copy: two float64 sums on the device, position-weighted
        flat = t.detach().reshape(-1).double()
        ramp = torch.arange(1, flat.numel() + 1, device=flat.device, dtype=torch.float64)
        return (str(t.dtype), tuple(t.shape), float(flat.sum()), float((flat * ramp).sum()))
    if getattr(t, "bnb_quantized", False) and getattr(t, "quant_state", None) is not None:
        return _four_bit_print(t)  # read on the parameter itself: detach() drops its quant_state
    return (str(t.dtype), tuple(t.shape), _crc(t))


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
