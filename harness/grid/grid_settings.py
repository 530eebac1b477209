"""The grid's own keys: which tasks, cells, conditions and methods a run holds, and where it writes.
The other sections of a grid config are the stages' own settings (harness/grid/configuration/config.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from harness.core.design import conditions
from harness.core.plumbing.errors import SettingsError
from harness.core.plumbing.settings import NEVER, WHEN_SET, Settings, option, since
from harness.scoring.classifier import STUDY_TASK_OVERRIDES
from harness.scoring.zero_shot import Rule

# the parts of a run that can be off (sections.recorded)
EXPOSURE, STREAM, LEAK = "exposure", conditions.STREAM, conditions.LEAK
# the most copies of its answer a leak document holds: more fills a 256-token sequence with labels
MAX_LEAK_STRENGTH = 16


@dataclass(kw_only=True)
class GridSettings(Settings):
    """The run's shape: tasks, cells, conditions, methods, the exposure test and the results folder."""

    MINIMUM = {
        "subsamples": 1,
        "eval_batch_size": 1,
        "codec_context": 0,
        "codec_block": 1,
        "stream_chunks": 2,
        "stream_chunk_size": 1,
        "leak_strength": 1,
    }
    BELOW = {"leak_strength": MAX_LEAK_STRENGTH + 1}
    # method, methods, method_settings: the method's own record stands in for them (resolve.recorded)
    RECORD = dict.fromkeys(("tasks", "subsamples", "cells", "out", "model_tag", "notes"), NEVER)
    RECORD |= dict.fromkeys(("method", "methods", "method_settings", "doses"), NEVER)
    RECORD["score_together"] = WHEN_SET  # it moves the numbers in their last bits, as a batch size does
    RECORD["codec_block"] = NEVER  # recorded beside CoDeC's span, where CoDeC runs (resolve.recorded)
    RECORD |= dict.fromkeys(("conditions", "codec_context", "scores", "accuracy"), WHEN_SET)
    # the first stream restarted from the base each chunk: its results keep their hash (since)
    RECORD |= {"stream_mode": since("restart"), "stream_chunk_size": WHEN_SET}
    # leak_strength counted copies of the leak's documents before 2026-12-07 (more steps than test's); it
    # counts copies of each answer now, at test's steps (resolve.recorded adds leak_plant where that differs)
    RECORD["leak_strength"] = since(1)
    RECORD["leak_steps"] = since("matched")  # recorded where a run names its leak unmatched
    HOME = ("out",)
    PARTS = {"stream_chunks": STREAM, "exposure": EXPOSURE, "codec_context": EXPOSURE, "scores": EXPOSURE}
    PARTS |= {"stream_mode": STREAM, "stream_chunk_size": STREAM}
    PARTS |= {"leak_strength": LEAK, "leak_steps": LEAK}

    flow: str = option(
        "zero_shot",
        "zero_shot: prompt adapters scored zero-shot; classifier: TAPT on raw texts, then a head "
        "fine-tuned on train; or your own flow, as path/to/my_flow.py:FLOW or an installed entry point",
    )
    task_overrides: dict[str, dict] = option(
        STUDY_TASK_OVERRIDES, "per-task settings {slug: {key: value}} (default: the study's long-text tasks)"
    )
    conditions: list[str] = option(
        list(conditions.PAIRED),
        f"conditions scored per unit; add {conditions.LEAK} for TAPT on test's prompts with their answers "
        "(planted labeled contamination: a positive control for the bias), and stream for test scored "
        "first, then adapted on: test cut into chunks, each scored by the method adapted on the chunks "
        "before it (what legitimate online test-time adaptation gains; see stream_mode)",
    )
    leak_strength: int = option(
        1,
        "with leak: how strongly the answers are planted in test's documents, at test's documents and "
        f"steps: each document followed by its answer this many times (at most {MAX_LEAK_STRENGTH}; the "
        "classifier flow masks every copy on every read; tapt-bench pilot finds the smallest the design "
        "sees)",
    )
    leak_steps: Literal["matched", "unmatched"] = option(
        "matched",
        "with leak: matched: the summary reads the leak only where its model trained the same steps as "
        "extra's and test's (else it names the difference and reads no control); unmatched: a method "
        "whose leak trains other steps, read anyway with the difference named",
    )
    stream_mode: Literal["carry", "restart"] = option(
        "carry",
        "with the stream condition: carry (TLM's online setting, as its authors run it): one adapter "
        "trained on, chunk after chunk of stream_chunk_size documents, a fresh optimiser each; restart: "
        "chunk i scored by the method run from the base on chunks 0..i-1, test cut into stream_chunks",
    )
    stream_chunk_size: int = option(
        8, "with stream_mode carry: documents a chunk (the authors' 8; the first is scored by the base)"
    )
    stream_chunks: int = option(
        4, "with stream_mode restart: the chunks test is cut into (the first is scored by the base)"
    )
    method: str | None = option(
        None,
        "the adaptation method audited: a built-in (`tapt-bench methods list`), an installed entry point, "
        "package.module:attr or path/to/file.py:attr (default: the flow's default method, the study's); "
        "another method's units go to <model>+<method>",
    )
    methods: list[str] = option(
        [],
        "several methods side by side, each run on the same subsamples into its own model folder "
        "(empty: the one `method`)",
    )
    method_settings: dict[str, dict] = option(
        {},
        "each method's settings, {method: {key: value}} (`tapt-bench methods show NAME` lists them); the "
        "flow's default method may also take its settings as this config's own keys (epochs, lr, ...)",
    )
    doses: dict[str, dict[str, list]] = option(
        {},
        "a method run at several strengths, {method: {setting: [value, ...]}} (one setting a method): one "
        "model folder a value, <model>+<method>@<setting>=<value>, on the same subsamples",
    )
    exposure: bool = option(
        False,
        "run the exposure test in every unit: score test and extra documents under each condition's "
        "model (the text statistic from text_score, and the label margin); base is the reference",
    )
    codec_context: int = option(
        0,
        "with exposure: also CoDeC (Zawalski et al. 2025), each test and extra document scored again with "
        "this many documents of its own split before it (the authors use 1), drawn per codec_block "
        "documents; 0: off",
    )
    codec_block: int = option(
        1,
        "with codec_context: documents that share one drawn context, read once (1: a context per "
        "document, the authors'; 8: a third cheaper, but a block's drops move together, so CoDeC's test "
        "permutes whole blocks and sees less)",
    )
    scores: dict[str, dict] = option(
        {},
        "with exposure: your per-document scores, {path/to/file.py:SCORE: {setting: value}}; each is "
        "computed for every condition's model and read by its detector (contamination calibrate)",
    )
    tasks: list[str] = option(["all"], "task slugs (a single slug is one task), or all")
    subsamples: int = option(20, "subsamples per task")
    cells: list[str] = option(
        [],
        "several cells in one run, each 'm/n/subsamples' (e.g. 50/500/20); empty: the one cell m, "
        "n, subsamples",
    )
    eval_batch_size: int = option(8, "lm-eval scoring batch size")
    score_together: bool = option(
        False,
        "zero_shot: train a unit's adapters first, then score the base and every adapter in one pass, each "
        "batch of prompts under all of them (PEFT's adapter_names). A forward's size moves the sums in "
        "their last bits: in bf16 on a GPU 3.5% of predictions moved, for no gain with one worker "
        "(docs/measurements/training.md)",
    )
    accuracy: Rule = option(
        "acc",
        "zero_shot: how a prediction is read from the classes' log-probs: acc (lm-eval's: the largest "
        "sum) or mean_token (the study's CAPPr rule: the largest mean per token); a unit records both",
    )
    out: str = option("results", "results root; units go to <out>/m<m>/n<n>/<model>/<task>/")
    model_tag: str | None = option(None, "folder name of the model (default: the base's last path part)")
    notes: str | None = option(None, "free-form, kept in the manifest")

    def __post_init__(self) -> None:
        if isinstance(self.tasks, str):
            self.tasks = [self.tasks]
        super().__post_init__()

    def check(self) -> None:
        chosen = set(self.conditions)
        if len(chosen) < len(self.conditions) or not set(conditions.PAIRED) <= chosen <= set(conditions.ALL):
            allowed = f"{', '.join(conditions.PAIRED)} and optionally {', '.join(conditions.OPTIONAL)}"
            raise SettingsError.of("conditions", f"must be {allowed}, got {self.conditions}")
        self.conditions = [c for c in conditions.ALL if c in self.conditions]
        for name in ("leak_strength", "leak_steps"):
            value = getattr(self, name)
            if (
                value != GridSettings.__dataclass_fields__[name].default
                and conditions.LEAK not in self.conditions
            ):
                problem = (
                    f"is {value!r}, and no leak is planted: add {conditions.LEAK} to conditions, or drop it"
                )
                raise SettingsError.of(name, problem)
        if not self.tasks:
            raise SettingsError.of("tasks", "is empty: name at least one task (see `tapt-bench tasks list`)")
        twice = sorted({t for t in self.tasks if self.tasks.count(t) > 1})
        if twice:
            raise SettingsError.of("tasks", f"names {', '.join(twice)} more than once: name each task once")
        self.doses = {name: numbers_of(swept) for name, swept in self.doses.items()}
        for name, swept in self.doses.items():
            if (
                not isinstance(swept, dict)
                or len(swept) != 1
                or not all(
                    isinstance(v, list) and v and len(set(map(repr, v))) == len(v) for v in swept.values()
                )
            ):
                problem = (
                    f"{name}: {swept!r} must name one setting and its distinct values, e.g. "
                    "{prompt-tapt: {lr: [0.0002, 0.0006]}}"
                )
                raise SettingsError.of("doses", problem)
            named = self.methods or [self.method] if (self.methods or self.method) else None
            if named is not None and name not in named:
                problem = f"{name} is not among the run's methods {named}: name it there"
                raise SettingsError.of("doses", problem)
        if self.methods and self.method:
            problem = (
                f"and methods are both set ({self.method!r}, {self.methods}); name every method in methods"
            )
            raise SettingsError.of("method", problem)

    def parts(self) -> dict[str, bool]:
        """Which optional parts of a unit this run has (their keys are recorded only when on)."""
        return {
            EXPOSURE: self.exposure,
            STREAM: conditions.STREAM in self.conditions,
            LEAK: conditions.LEAK in self.conditions,
        }


def numbers_of(swept):
    """A dose's values with each number written as text read as the number (`2e-3` is 0.002: one dose,
    one folder, whichever way it is spelt); other values as they are."""
    if not isinstance(swept, dict):
        return swept
    return {k: [number(v) for v in vs] if isinstance(vs, list) else vs for k, vs in swept.items()}


def number(value):
    if not isinstance(value, str):
        return value
    try:
        read = float(value)
    except ValueError:
        return value
    return int(read) if value.strip().lstrip("+-").isdigit() else read
