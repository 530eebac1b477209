"""A base model's weights, fingerprinted: a method must give the base back unchanged after each condition,
and the grid checks that it did instead of trusting it (a changed base would be scored as the next
condition's and the next unit's base without a word).

The fingerprint is a CRC-32 of every parameter's and buffer's bytes, per name (zlib's CRC runs at
memory speed; a cryptographic hash is not needed against a method that is not an adversary). Tensors
on an accelerator are summed there instead of copied to the host.
"""

from __future__ import annotations

import zlib

import torch

Fingerprint = dict[str, tuple]


def _tensor_print(t: torch.Tensor) -> tuple:
    t = t.detach()
    if t.device.type != "cpu":  # no host copy: two float64 sums on the device, position-weighted
        flat = t.reshape(-1).double()
        ramp = torch.arange(1, flat.numel() + 1, device=flat.device, dtype=torch.float64)
        return (str(t.dtype), tuple(t.shape), float(flat.sum()), float((flat * ramp).sum()))
    data = t.contiguous().reshape(-1).view(torch.uint8).numpy()
    return (str(t.dtype), tuple(t.shape), zlib.crc32(data))


def fingerprint(model: torch.nn.Module) -> Fingerprint:
    """Per parameter and buffer name: dtype, shape and a checksum of its values."""
    named = dict(model.named_parameters(remove_duplicate=True))
    named |= {f"buffer:{k}": v for k, v in model.named_buffers(remove_duplicate=True)}
    return {name: _tensor_print(t) for name, t in named.items()}


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
