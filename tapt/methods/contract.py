"""A method's contract: what it is given (`Inputs`), what it returns (`Adapted`), and what it is (`Method`:
its name, flows, settings and one `adapt` call), with the record keys the grid reads of it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.core.plumbing.errors import UserError, named, storage_problem
from harness.core.plumbing.settings import Settings
from harness.tasks.protocol import Spec

if TYPE_CHECKING:
    from harness.core.engine import weights

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a method's name becomes a results folder: no paths
DIAGNOSTICS = "diagnostics"  # the record's map of what the method reports of itself (Method.diagnostics)
LEARNED_FROM = "learned_from"  # the record's count of documents the method learned from (0: nothing)
COUNTS = (LEARNED_FROM, "steps")  # a record's counts: integers of at least 0 where given
MOVED = "moved"  # the record's measure of how far the model moved from the base (weights.movement)
VOTES = "votes"  # a record's labels that a method made up for itself, {row: choice index (or a
# generative task's answer) or None}
SAMPLED = "sampled"  # where it voted: each row's samples' answers, {row: [answer or None, ...]}
GREEDY = "greedy"  # and the base's own greedy answer to each row, read the same way, {row: answer or None}


@dataclass
class Inputs:
    """What a method adapts on: the base and the documents of one split for one condition."""

    model: Any  # the loaded causal LM (adapt it in place, e.g. with PEFT); None in the classifier flow
    tokenizer: Any
    spec: Spec  # the task: prompts, choices and the answer delimiter
    docs: pd.DataFrame  # text, prompt, choices, row; `label` only for the leak condition
    settings: Settings  # an instance of the method's settings class
    seed: int
    workdir: Path  # scratch (a Trainer's output_dir); removed after the condition
    # a chunk of the stream that carries the method on (stream_mode carry): `model` is the model this
    # method returned for the chunk before (the base for the first); train its adapter on, with a fresh
    # optimiser, as TLM's authors run their online setting. Only a method with `carries` gets one.
    online: bool = False
    # the classifier flow: the backbone's folder, which the method loads and saves an adapted copy of
    # (`model` is then None)
    model_dir: str | None = None
    # the leak (docs with `label`): how many times each document's answer follows it, at the same
    # documents and steps as test (the grid's leak_strength); a text method writes it that many times
    leak_strength: int = 1

    @property
    def labeled(self) -> bool:
        return "label" in self.docs

    def lora(self, config):
        """The model to train: the adapter this method gave the chunk before (online, carried on), else
        a new PEFT model of `config` over the base."""
        from peft import get_peft_model

        return self.model if self.carried() else get_peft_model(self.model, config)

    def carried(self) -> bool:
        """Whether `model` already holds this method's adapter (a stream's chunk after the first)."""
        return self.online and hasattr(self.model, "peft_config")


@dataclass
class Adapted:
    """An adapted model (scored as the condition's model) and what made it. `restore` returns the
    base for the next condition; by default a PEFT model's `unload()` (the adapter detached)."""

    model: Any = None  # the adapted causal LM; None in the classifier flow
    record: dict = field(default_factory=dict)  # JSON-able: steps, losses, what was selected, learned_from
    restore: Callable[[], Any] | None = None
    use_cache: Any = None  # the base's config.use_cache before adapt (Method.run sets it)
    model_dir: str | None = None  # the classifier flow: the folder of the adapted backbone

    def base(self) -> Any:
        base = self.restore() if self.restore is not None else self.model
        if self.restore is None and hasattr(base, "unload"):
            base = base.unload()
        config = getattr(base, "config", None)
        if config is not None and hasattr(config, "use_cache") and self.use_cache is not None:
            config.use_cache = self.use_cache  # transformers' Trainer turns it off to train: not the method's
        return base


@dataclass(frozen=True)
class Method:
    """One adaptation method: `adapt(Inputs) -> Adapted` with settings of class `settings`."""

    name: str
    flows: tuple[str, ...]
    settings: type[Settings]
    adapt: Callable[[Inputs], Adapted]
    about: str = ""
    source: str = "built in"
    recipe: str = ""  # how this implementation follows its authors' code, point by point (`methods show`)
    # what the method reports of itself: its record's key -> the column the summary and report show it
    # as (a key ending in `_share` is shown as a percentage); the grid writes the map into each record
    diagnostics: dict[str, str] = field(default_factory=dict, hash=False)
    # it can continue training: given Inputs.online and the model it returned for the chunk before, it
    # trains that model's adapter on (the stream's carry mode checks that it returns the same model)
    carries: bool = False
    # why its settings cannot run on a task (a setting the task never reads, say), or None: checked for
    # every task of a run before its first unit
    check_task: Callable[[Settings, Any], str | None] | None = field(default=None, hash=False)

    def run(
        self, inputs: Inputs, base_print: weights.Fingerprint | None = None, condition: str = ""
    ) -> Adapted:
        """`adapt`, with a method's own failure named as its own and what it returned checked: a model
        of the kind it was given, a JSON-able record, and a model that moved from the base wherever the
        method says it learned (its record's `moved`; `base_print`: the base's fingerprint, if known;
        `condition` names the condition in its errors)."""
        from harness.core.engine import weights  # torch: imported where a method runs, not as settings parse

        use_cache = getattr(getattr(inputs.model, "config", None), "use_cache", None)
        given_dir = inputs.model_dir is not None
        if not given_dir and base_print is None:
            base_print = weights.fingerprint(inputs.model)
        try:
            out = self.adapt(inputs)
        except (UserError, KeyboardInterrupt):
            raise
        except Exception as err:
            problem = storage_problem(err)  # its checkpoints, its cache: the disk's, not the method's
            if problem:
                raise UserError(
                    f"method {self.name} could not write: {problem}; finished units are kept: then run the "
                    "same command again"
                ) from err
            raise UserError(f"method {self.name} ({self.source}) failed: {named(err)}") from err
        self.check_returned(out, given_dir)
        out.use_cache = use_cache
        if self.diagnostics:  # the summary and the report read the columns from the record itself
            out.record = {**out.record, DIAGNOSTICS: dict(self.diagnostics)}
        if not given_dir:
            out.record = {**out.record, MOVED: weights.movement(out.model, base_print)}
            self.check_moved(out.record, len(inputs.docs), condition)
        return out

    def check_returned(self, out: Any, given_dir: bool) -> None:
        """What `adapt` returned: an Adapted, its model of the kind it was given (a causal LM, or a model
        dir in the classifier flow), its record strict JSON with counts and diagnostics that are numbers."""
        who = f"method {self.name} ({self.source})"
        if not isinstance(out, Adapted):
            raise UserError(
                f"{who} returned {type(out).__name__}; adapt must return tapt.methods.Adapted(model, record)"
            )
        if given_dir and not (isinstance(out.model_dir, (str, Path)) and Path(out.model_dir).is_dir()):
            raise UserError(
                f"{who} returned Adapted(model_dir={out.model_dir!r}); the classifier flow needs the folder "
                "of the adapted backbone"
            )
        lm = all(hasattr(out.model, a) for a in ("named_parameters", "config", "device", "generate"))
        if not given_dir and not lm:
            raise UserError(
                f"{who} returned Adapted({type(out.model).__name__}), which is not a causal LM (no config, "
                "device or generate); adapt must return the adapted model: Inputs.model itself, or a PEFT "
                "model over it"
            )
        if not isinstance(out.record, dict):
            raise UserError(f"{who} returned a record of type {type(out.record).__name__}; it must be a dict")
        for key, value in out.record.items():
            try:
                json.dumps(value, allow_nan=False)  # strict JSON: NaN and Infinity are not numbers there
            except (TypeError, ValueError) as err:
                raise UserError(
                    f"{who} returned a record whose key {key!r} is not strict JSON ({err}); record only "
                    "finite numbers, strings, lists and dicts (None for a missing number)"
                ) from None
        for key in COUNTS:
            value = out.record.get(key)
            if key in out.record and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise UserError(
                    f"{who} returned a record whose {key!r} is {value!r}; it must be a count, an integer of "
                    "at least 0"
                )
        for key in self.diagnostics:  # the summary averages them over units: numbers only
            value = out.record.get(key)
            values = value if isinstance(value, list) else [value]
            if key in out.record and not all(numeric(v) or v is None for v in values):
                raise UserError(
                    f"{who} returned a record whose diagnostic {key!r} is {value!r}; the summary and the "
                    "report average a diagnostic over units: record a number (or a list of numbers), and "
                    "text under a key that diagnostics does not name"
                )

    def check_moved(self, record: dict, docs: int, condition: str) -> None:
        """Stop when the method says it took optimizer steps on documents, yet its model is exactly the
        base (no LoRA layer adds a weight change, or no tensor changed): no gradient reached its weights."""
        from harness.core.engine import weights

        moved = record[MOVED]
        claimed = isinstance(record.get("steps"), int) and record["steps"] > 0
        if not claimed or not weights.did_not_move(moved) or nothing_learned(record):
            return  # a method that claims no step may act without weights (a hook it removes on restore)
        steps = f"{record['steps']} optimizer steps"
        what = (
            f"none of its {moved['layers']} LoRA layers adds a weight change"
            if "norm" in moved
            else "none of the base's tensors changed"
        )
        raise UserError(
            f"method {self.name} ({self.source}) did not move its model"
            + (f" in the {condition} condition" if condition else "")
            + f": after {steps} on {docs} documents {what}, so no gradient reached the weights it "
            "trains; nothing of this condition is scored or written"
        )

    def configured(self, values: dict | None, where: str, hidden: tuple[str, ...] = ()) -> Settings:
        """The method's settings from a mapping (a config's `method_settings: {name: {...}}`; `hidden`: its
        keys that are set elsewhere, not listed as allowed there)."""
        from harness.core.plumbing.settings import from_mapping

        return from_mapping(self.settings, values or {}, where, hidden)


def numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def nothing_learned(record: dict) -> str | None:
    """Why a method's record says it adapted on nothing (None where it learned from something)."""
    if record.get(LEARNED_FROM) == 0:
        return "learned from 0 documents"
    if record.get("steps") == 0:
        return "took 0 optimizer steps"
    return None


def vote_agreement(record: dict, docs: pd.DataFrame) -> dict:
    """For a method that made up labels (`votes`): their agreement with the gold labels of the documents
    it adapted on, measured after it ran, by the grid (the method itself never reads them). Where it
    recorded its samples and the base's greedy answers: its premise beside it, each against the gold
    answer on the same documents: `label_accuracy` (the vote: maj@N), `greedy_accuracy` (pass@1 greedy),
    `sample_accuracy` (one sample's, the mean) and `unreadable_share` (samples with no answer)."""
    votes = record.get(VOTES)
    if not votes:
        return {}
    answers = [*votes.values(), *(record.get(GREEDY) or {}).values()]  # a multiple-choice task's: indices
    generative = any(isinstance(v, str) for v in answers)
    if generative:  # a generative task's answers: its gold one, equal as numbers where both are
        from harness.tasks.generative import equivalent as same

        gold = dict(
            zip(docs["row"].astype(int).astype(str), docs["choices"].map(lambda c: str(c[0]).strip()))
        )
    else:
        gold = dict(zip(docs["row"].astype(int).astype(str), docs["label"].astype(int)))

        def same(a, b) -> bool:
            return a == b

    voted = {r: v for r, v in votes.items() if v is not None and r in gold}
    agree = sum(same(v, gold[r]) for r, v in voted.items())
    out = {"label_accuracy": agree / len(voted) if voted else None, "voted": len(voted)}
    sampled, greedy = record.get(SAMPLED) or {}, record.get(GREEDY) or {}
    rows = [r for r in gold if r in votes and r in greedy and r in sampled]
    if rows:  # the premise, on the documents with all three (a vote of no answer counts as wrong)
        samples = [a for r in rows for a in sampled[r]]
        right = [same(a, gold[r]) for r in rows for a in sampled[r]]
        out |= {
            "premise_documents": len(rows),
            "vote_accuracy": sum(votes[r] is not None and same(votes[r], gold[r]) for r in rows) / len(rows),
            "greedy_accuracy": sum(same(greedy[r], gold[r]) for r in rows) / len(rows),
            "sample_accuracy": sum(right) / len(right) if right else None,
            "unreadable_share": sum(a is None for a in samples) / len(samples) if samples else None,
        }
    return out
