"""Run the exposure test on one subsample of a task: a checkpoint (+ adapter) against its base, on
every document of the subsample's test and extra splits."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

import pandas as pd

from contamination import doc_scores
from contamination.exposure import check_sizes, exposure_test
from harness.core import models
from harness.core.errors import UserError
from harness.core.models import ModelSettings
from harness.core.settings import Settings, option
from harness.tasks.splits import Spec, find_spec, subsample_docs
from harness.tasks.subsample import SampleSettings

SPLITS = ("test", "extra")


@dataclass(kw_only=True)
class ExposureSettings(Settings):
    """How the exposure test scores a text (the grid's `exposure` setting uses the same)."""

    text_score: Literal["loss", "mink++"] = option(
        "loss", "the text statistic: loss (of the document's own tokens) or mink++ (Min-K%++, K 20%)"
    )


@dataclass(kw_only=True)
class ExposureArgs(SampleSettings, ModelSettings, ExposureSettings):
    """One `tapt-bench contamination exposure`: a checkpoint (+ adapter) against --base on a subsample."""

    MINIMUM = {"subsample": 0, "batch_size": 1}

    task: str = option(
        help="task slug (ag_news), task name (tapt_ag_news), a task YAML path, or any lm-eval "
        "multiple-choice task"
    )
    subsample: int = option(0, "index of the seeded subsample")
    peft: str | None = option(None, "a PEFT adapter dir, trained on --checkpoint if given, else on --base")
    checkpoint: str | None = option(
        None, "a full model dir trained from --base (e.g. a pretrain-text output); default: --base itself"
    )
    uncalibrated: bool = option(
        False, "score the suspect only, without --base as the reference (the statistic is then uncalibrated)"
    )
    format: Literal["prompt", "raw"] = option(
        "prompt",
        "prompt: the zero-shot prompt as prompt TAPT saw it (causal LM); raw: the raw text as "
        "pretrain-text saw it (causal LM, or masked LM under a fixed seeded mask for an encoder)",
    )
    batch_size: int = option(8, "documents per forward pass")
    out: str | None = option(None, "write the result JSON (with every document's scores) here")
    json: bool = option(False, "print the result as JSON")

    def documents(self) -> tuple[Spec, pd.DataFrame]:
        """The task and the docs of test and extra (column `split`), checked big enough to test."""
        spec = find_spec(self.task, self.include_path)
        split_docs = subsample_docs(spec, self, self.subsample)
        check_sizes(len(split_docs["test"]), len(split_docs["extra"]))
        docs = pd.concat([split_docs[s].assign(split=s) for s in SPLITS], ignore_index=True)
        return spec, docs


def scores_of(path: str, peft: str | None, spec: Spec, docs: pd.DataFrame, args: ExposureArgs):
    masked = args.format == "raw" and not models.is_decoder(path)
    model, tokenizer = models.load_scoring_model(path, peft, masked=masked)
    if args.format == "prompt":
        return doc_scores.prompt_scores(model, tokenizer, spec, docs, args.batch_size)
    return doc_scores.raw_scores(model, tokenizer, docs, masked, args.seed, args.batch_size)


def check(args: ExposureArgs) -> None:
    """Every input checked before any scoring: the models, the adapter's base, the tokenizers."""
    models.check_base(args.base)
    suspect = args.checkpoint or args.base
    if args.checkpoint:
        models.check_base(args.checkpoint)
        models.check_same_tokenizer(args.checkpoint, args.base)
    if args.peft:
        models.check_adapter_base(suspect, args.peft)
    if args.format == "prompt" and not models.is_decoder(suspect):
        raise UserError(
            f"--format prompt scores prompts with a causal LM, and {suspect} is an encoder; "
            "pass --format raw for a pretrain-text checkpoint of an encoder"
        )
    if not (args.checkpoint or args.peft or args.uncalibrated):
        print("note: no --checkpoint or --peft: the base is tested against itself (nothing can differ)")


def run(args: ExposureArgs) -> dict[str, Any]:
    """The test for the suspect (checkpoint or base, + adapter) against the base, with every
    document's scores, the settings and the wall time in the result."""
    spec, docs = args.documents()
    check(args)
    start = time.perf_counter()
    suspect = scores_of(args.checkpoint or args.base, args.peft, spec, docs, args)
    reference = None if args.uncalibrated else scores_of(args.base, None, spec, docs, args)
    result = exposure_test(suspect, reference, args.text_score, args.seed)
    per_doc = {"suspect": suspect.to_dict("list")}
    if reference is not None:
        per_doc["reference"] = reference.to_dict("list")
    return {
        **result,
        "documents": per_doc,
        "settings": asdict(args),
        "seconds": time.perf_counter() - start,
    }
