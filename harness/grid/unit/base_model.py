"""The zero-shot base of this process, loaded once for every unit it runs (locally or in a Ray worker),
with the state of its weights, hooks, config and tokenizer at load: every reuse and every method's
restore is checked against that state. Also the base's scores, shared by methods side by side."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.engine import models, weights
from harness.core.engine.models import FormSettings, ModelSettings
from harness.core.plumbing.errors import UserError
from tapt import methods


@dataclass
class Base:
    """A loaded base, its tokenizer and their state at load (weights.base_state)."""

    model: Any
    tokenizer: Any
    at_load: dict

    def check_restored(self, method: methods.Method, cond: str, model) -> None:
        """Stop the run when a method's restore did not give the base back as it was loaded (its weights,
        the hooks on its modules, its config, the tokenizer): the next condition (and unit) would be
        scored on a changed base. Where it did, `model` is the base from now on."""
        named = hasattr(model, "named_parameters")
        changed = (
            weights.differences(self.at_load, weights.base_state(model, self.tokenizer))
            if named
            else "not a model"
        )
        if changed:
            raise UserError(
                f"method {method.name} ({method.source}) did not give the base back after the {cond} "
                f"condition (it differs from the base as loaded: {changed}); its Adapted.restore must "
                "return the base unchanged (e.g. a PEFT model's unload(), with any hook it added removed, "
                "the tokenizer and the config as they were). Stopped before the next condition was scored."
            )
        self.model = model

    def check_tokenizer(self, method: methods.Method, cond: str) -> None:
        """Stop before scoring when a method changed the tokenizer (added tokens fail deep in scoring)."""
        now = weights.tokenizer_print(self.tokenizer)
        changed = weights.differences({k: v for k, v in self.at_load.items() if k in now}, now)
        if changed:
            raise UserError(
                f"method {method.name} ({method.source}) changed the tokenizer in the {cond} condition "
                f"({changed}); a method adapts the model and leaves the tokenizer as it was. Stopped before "
                "scoring."
            )


class Loaded:
    """The one base this process holds: another base replaces it, a kept one is checked unchanged before
    it is reused, and one a failed unit may have left adapted is forgotten."""

    def __init__(self) -> None:
        self.key: tuple | None = None
        self.base: Base | None = None

    def get(self, model: ModelSettings, form: FormSettings) -> Base:
        key = (model.base, form.quantize, form.fallback_lora, form.bf16)
        if self.base is not None and self.key == key:
            now = weights.base_state(self.base.model, self.base.tokenizer)
            if not weights.differences(self.base.at_load, now):  # never reused unverified
                return self.base
        self.forget()
        path = models.resolve(model.base)
        models.check_base(path)
        lm = models.load_causal_lm(path, form.quantize, form.fallback_lora, form.bf16)
        tokenizer = models.tokenizer(path)
        self.key, self.base = key, Base(lm, tokenizer, weights.base_state(lm, tokenizer))
        return self.base

    def forget(self) -> None:
        self.key = self.base = None


LOADED = Loaded()


def loaded_base(model: ModelSettings, form: FormSettings) -> Base:
    """The base in its form, loaded once per process (LOADED)."""
    return LOADED.get(model, form)


class BaseScores:
    """The base's scores per (results root, base settings, task, subsample), with the model folder that
    computed them: methods side by side score the base once per unit (scoring is deterministic)."""

    def __init__(self) -> None:
        self.kept: dict[tuple, tuple[str, dict, dict]] = {}

    def of_another(self, key: tuple, tag: str) -> tuple[str, dict, dict] | None:
        """(the folder that scored it, scores, exposure) where another method's unit scored this base."""
        found = self.kept.get(key)
        return found if found is not None and found[0] != tag else None

    def keep(self, key: tuple, tag: str, scored: dict, exposed: dict) -> None:
        self.kept[key] = (tag, dict(scored), dict(exposed))

    def clear(self) -> None:
        self.kept.clear()


BASE_SCORES = BaseScores()
