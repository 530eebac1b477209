"""Run the exposure test: a checkpoint (+ adapter) against its base, on the suspect documents (a
subsample's test split, or a whole split of the task) and the reference documents (the subsample's
extra split, another split of the task, or a file of the user's)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from contamination.exposure import check_sizes, exposure_test
from harness.core.engine import models
from harness.core.engine.models import ModelSettings
from harness.core.plumbing.errors import UserError
from harness.core.plumbing.sections import Sections
from harness.core.plumbing.settings import Settings, option
from harness.tasks import adapters, documents
from harness.tasks.protocol import Spec, find_spec, subsample_docs
from harness.tasks.subsample import SampleSettings

SPLITS = ("test", "extra")


@dataclass(kw_only=True)
class ExposureSettings(Settings):
    """How the exposure test scores a text (the grid's `exposure` setting uses the same)."""

    PARTS = {"text_score": "exposure"}  # in a grid: recorded only where the exposure test runs

    text_score: Literal["loss", "mink++"] = option(
        "loss",
        "the text statistic: loss (of the document's own tokens) or mink++ (Min-K%++, K 20%)",
    )


@dataclass(kw_only=True)
class ExposureOptions(Settings):
    """Which documents are suspect and which are the reference, which checkpoint is tested, how it is read."""

    MINIMUM = {"subsample": 0, "batch_size": 1, "suspect_n": 1, "reference_n": 1, "codec_context": 0}

    task: str = option(
        help="task slug (ag_news), task name (tapt_ag_news), a task YAML path, or any lm-eval "
        "multiple-choice task"
    )
    suspect_split: str | None = option(
        None,
        "test a whole split of the task instead of the subsample's test split: test, validation or train "
        "for an lm-eval task, a tapt_* task's one split (train); needs --reference-split or --reference-file",
    )
    suspect_n: int | None = option(None, "a seeded sample of this many suspect documents (default: all)")
    reference_split: str | None = option(
        None, "the reference documents: another split of the task, one the model cannot have seen"
    )
    reference_file: str | None = option(
        None,
        "the reference documents: a csv/jsonl/parquet file in the task's format (a tapt_* task's text and "
        "label columns, an lm-eval task's dataset columns), rendered by the task's prompt",
    )
    reference_n: int | None = option(None, "a seeded sample of this many reference documents (default: all)")
    subsample: int = option(0, "index of the seeded subsample")
    peft: str | None = option(None, "a PEFT adapter dir, trained on --checkpoint if given, else on --base")
    checkpoint: str | None = option(
        None,
        "a full model dir trained from --base (a `train --method raw-text` output, say); default: --base",
    )
    uncalibrated: bool = option(
        False, "score the suspect only, without --base as the reference (the statistic is then uncalibrated)"
    )
    format: Literal["prompt", "raw"] = option(
        "prompt",
        "prompt: the zero-shot prompt as prompt TAPT saw it (causal LM); raw: the raw text as "
        "raw-text TAPT saw it (causal LM, or masked LM under a fixed seeded mask for an encoder)",
    )
    batch_size: int = option(8, "documents per forward pass")
    codec_context: int | None = option(
        None,
        "CoDeC (Zawalski et al. 2025): each document scored again with this many others of its own set "
        "before it, drawn per document, under the suspect and, as its false-positive check, the base; "
        "0: off (it reads every document once more) (default: 1, the authors', with --format prompt; 0 "
        "with --format raw)",
    )
    out: str | None = option(None, "write the result JSON (with every document's scores) here")
    json: bool = option(False, "print the result as JSON")

    def check(self) -> None:
        if self.reference_split and self.reference_file:
            raise UserError("--reference-split and --reference-file both given; name one reference")
        if self.codec_context and self.format != "prompt":
            raise UserError(
                f"--codec-context {self.codec_context} runs CoDeC on prompts: pass --format prompt"
            )
        if self.codec_context is None:  # CoDeC reads prompts: on at the authors' k where it can run
            self.codec_context = 1 if self.format == "prompt" else 0

    def whole_split(self) -> bool:
        return bool(self.suspect_split or self.reference_split or self.reference_file)


class ExposureArgs(Sections):
    """One `tapt-bench contamination exposure`: a checkpoint (+ adapter) against --base on a subsample."""

    SECTIONS = {
        "sample": SampleSettings,
        "model": ModelSettings,
        "exposure_test": ExposureSettings,
        "options": ExposureOptions,
    }
    TITLES = {
        "sample": "the subsample",
        "model": "the base model",
        "exposure_test": "the exposure test",
        "options": "the documents and the checkpoint",
    }

    def complete(self) -> None:
        self.sample.default_chat_model(self.model.base)

    def check(self) -> None:
        o = self.options
        if self.sample.prompt_format == "chat" and (o.suspect_split or o.reference_file):
            raise UserError(
                "--prompt-format chat renders a subsample's prompts; a whole split or a file is read as "
                "plain prompts: drop --prompt-format"
            )
        if o.suspect_split and not (o.reference_split or o.reference_file):
            raise UserError(
                f"--suspect-split {o.suspect_split} needs a reference the model cannot have seen: "
                "--reference-split (another split of the task) or --reference-file (your own documents)"
            )
        if o.suspect_split and o.suspect_split == o.reference_split:
            raise UserError(f"--suspect-split and --reference-split both name {o.suspect_split!r}")

    def documents(self) -> tuple[Spec, pd.DataFrame, dict[str, str]]:
        """The task, the suspect (split `test`) and reference (split `extra`) docs, checked big enough
        to test, and what each set is, in words."""
        spec = find_spec(self.options.task, self.sample.include_path)
        if self.options.whole_split():
            sets, names = self.sources(spec)
            check_sizes(len(sets["test"]), len(sets["extra"]), whole_split=True)

            def plain(text: str) -> str:  # as a prompt reads it: whitespace runs are one space, ends none
                return " ".join(str(text).split())

            seen = set(sets["test"]["text"].map(plain))
            both = [t for t in sets["extra"]["text"] if plain(t) in seen]
            if both:
                raise UserError(
                    f"{len(both)} of the reference documents ({names['extra']}) are also suspect documents, "
                    f"whitespace aside (e.g. {both[0][:60]!r}); a reference must hold documents "
                    "the model cannot have seen: remove them from it"
                )
        else:
            sets = subsample_docs(spec, self.sample, self.options.subsample)
            names = {s: s for s in SPLITS}
            check_sizes(len(sets["test"]), len(sets["extra"]))
        docs = pd.concat([sets[s].assign(split=s) for s in SPLITS], ignore_index=True)
        return spec, docs, names

    def sources(self, spec: Spec) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
        o, sample = self.options, self.sample
        if o.suspect_split:
            suspect = documents.split_docs(spec, o.suspect_split, sample.data_dir)
            suspect_name = f"the {o.suspect_split} split"
        else:
            suspect = subsample_docs(spec, sample, o.subsample)["test"]
            suspect_name = f"test (subsample {o.subsample}, n {sample.n})"
        suspect = documents.sample(suspect, o.suspect_n, sample.seed, f"--suspect-n ({suspect_name})")
        if o.reference_file:
            reference, reference_name = documents.file_docs(spec, o.reference_file), o.reference_file
        elif o.reference_split:
            reference = documents.split_docs(spec, o.reference_split, sample.data_dir)
            reference_name = f"the {o.reference_split} split"
        said = f"--reference-n ({reference_name})"
        reference = documents.sample(reference, o.reference_n, sample.seed, said)
        names = {
            "test": f"{suspect_name} ({len(suspect)} docs)",
            "extra": f"{reference_name} ({len(reference)} docs)",
        }
        return {"test": suspect, "extra": reference}, names


def scores_of(path: str, peft: str | None, spec: Spec, docs: pd.DataFrame, args: ExposureArgs):
    from contamination import doc_scores  # torch: imported where a model scores, not where settings parse

    o, seed = args.options, args.sample.seed
    masked = o.format == "raw" and not models.is_decoder(path)
    model, tokenizer = models.load_scoring_model(path, peft, masked=masked)
    if peft:
        adapters.check_record(peft, model)  # a tapt.json copied from another adapter names other documents
    if o.format == "prompt":
        return doc_scores.prompt_scores(
            model, tokenizer, spec, docs, o.batch_size, codec_context=o.codec_context, seed=seed
        )
    return doc_scores.raw_scores(model, tokenizer, docs, masked, seed, o.batch_size)


def check(args: ExposureArgs) -> None:
    """Every input checked before any scoring: the models, the adapter's base, the tokenizers."""
    o, base = args.options, args.model.base
    models.check_base(base, "--base")
    suspect = o.checkpoint or base
    if o.checkpoint:
        models.check_base(o.checkpoint, "--checkpoint")
        models.check_same_tokenizer(o.checkpoint, base)
    if o.peft:
        models.check_adapter_base(suspect, o.peft)
    if o.format == "prompt" and not models.is_decoder(suspect):
        raise UserError(
            f"--format prompt scores prompts with a causal LM, and {suspect} is an encoder; "
            "pass --format raw for a raw-text TAPT checkpoint of an encoder"
        )
    if not (o.checkpoint or o.peft or o.uncalibrated):
        print("note: no --checkpoint or --peft: the base is tested against itself (nothing can differ)")


def check_lengths(args: ExposureArgs, spec: Spec, docs: pd.DataFrame, names: dict[str, str]) -> None:
    """Prompt-format documents must fit the model's positions (the raw format keeps each text's first
    MAX_LENGTH tokens, as raw-text TAPT trains on them): a longer one is refused, named, before scoring."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(args.model.base)
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if args.options.format != "prompt" or not limit:
        return
    tokenizer = models.tokenizer(args.model.base)
    choices = sorted({spec.target_delimiter + c for cs in docs["choices"] for c in cs})
    longest = max(len(ids) for ids in tokenizer(choices, add_special_tokens=False)["input_ids"])
    sizes = np.array([len(ids) for ids in tokenizer(list(docs["prompt"]))["input_ids"]]) + longest
    over = sizes > limit
    if over.any():
        i = int(sizes.argmax())
        raise UserError(
            f"{int(over.sum())} document(s) are longer than the model's {limit} positions as prompts (the "
            f"longest, row {docs['row'].iloc[i]} of {names[docs['split'].iloc[i]]}, has {sizes[i]} tokens); "
            "shorten or drop them, or pass --format raw (which reads each text's first tokens)"
        )


def run(args: ExposureArgs) -> dict[str, Any]:
    """The test for the suspect (checkpoint or base, + adapter) against the base, with every
    document's scores, the settings and the wall time in the result."""
    spec, docs, names = args.documents()
    check(args)
    check_lengths(args, spec, docs, names)
    start = time.perf_counter()
    o, base = args.options, args.model.base
    suspect = scores_of(o.checkpoint or base, o.peft, spec, docs, args)
    reference = None if o.uncalibrated else scores_of(base, None, spec, docs, args)
    texts = list(docs["text"]) if o.whole_split() else None  # a reference not drawn with the suspect's
    result = exposure_test(suspect, reference, args.exposure_test.text_score, args.sample.seed, names, texts)
    per_doc = {"suspect": suspect.to_dict("list")}
    if reference is not None:
        per_doc["reference"] = reference.to_dict("list")
    return {
        **result,
        "documents": per_doc,
        "settings": args.keys(),
        "seconds": time.perf_counter() - start,
    }
