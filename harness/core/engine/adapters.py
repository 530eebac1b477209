"""A unit's LoRA adapters kept apart from the base after training, then put back on it together, each
named by its condition: one PEFT model whose forward reads each row under its own adapter
(`adapter_names`, '__base__' for none), so the base and every adapter are scored in one pass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BASE = "__base__"  # PEFT's name for a row read by the base alone


@dataclass(frozen=True)
class Kept:
    """One trained adapter off its base: its PEFT config and its tensors."""

    config: Any
    state: dict


def lone_lora(model) -> Kept | None:
    """The model's adapter, kept, where the model is the base under one PEFT LoRA adapter (what prompt TAPT
    and the study's methods return); None for anything else (a prompt-learning adapter, several adapters,
    a base changed in place), which is then scored on its own."""
    from peft import LoraConfig, PeftModel, get_peft_model_state_dict

    if not isinstance(model, PeftModel) or len(model.peft_config) != 1:
        return None
    ((name, config),) = model.peft_config.items()
    if type(config) is not LoraConfig:
        return None
    state = {k: v.detach().clone() for k, v in get_peft_model_state_dict(model, adapter_name=name).items()}
    return Kept(config, state)


def put_on(base, kept: dict[str, Kept]):
    """The base under every kept adapter, each named by its key (none active: rows choose theirs)."""
    from peft import get_peft_model, set_peft_model_state_dict

    model = None
    for name, adapter in kept.items():
        if model is None:
            model = get_peft_model(base, adapter.config, adapter_name=name)
        else:
            model.add_adapter(name, adapter.config)
        missing = set_peft_model_state_dict(model, adapter.state, adapter_name=name).unexpected_keys
        if missing:
            raise RuntimeError(f"adapter {name}: {len(missing)} tensors found no layer, e.g. {missing[0]}")
    return model.eval()


def active(model, name: str | None):
    """A context in which `model` reads every row under adapter `name` ('__base__': none; None: the model
    as it is)."""
    import contextlib

    if name is None:
        return contextlib.nullcontext()
    if name == BASE:
        return model.disable_adapter()
    model.set_adapter(name)
    return contextlib.nullcontext()
