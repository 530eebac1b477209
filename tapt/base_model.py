"""The base model a TAPT run starts from: checked to exist, and its tokenizer ready to pad."""

from __future__ import annotations

from harness.errors import UserError


def check_base(base: str) -> None:
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(base)
    except (OSError, ValueError) as err:
        raise UserError(
            f"base model {base!r} not found: not a local model dir and not loadable from the hub ({err})"
        ) from err


def tokenizer(base: str):
    """The base's tokenizer, padding with EOS where it has no pad token."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok
