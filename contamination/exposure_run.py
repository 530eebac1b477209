"""Run the exposure test: a checkpoint (+ adapter) against its base, on the suspect documents (a
subsample's test split, or a whole split of the task) and the reference documents (the subsample's
extra split, another split of the task, or a file of the user's)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from contamination.exposure import check_sizes, exposure_test
from harness.core.engine import models
from harness.core.engine.models import ModelSettings
from harness.core.plumbing.errors import UserError
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
class ExposureArgs(SampleSettings, ModelSettings, ExposureSettings):
    """One `tapt-bench contamination exposure`: a checkpoint (+ adapter) against --base on a subsample."""

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
        super().check()
        if self.reference_split and self.reference_file:
            raise UserError("--reference-split and --reference-file both given; name one reference")
        self.default_chat_model(self.base)
        if self.prompt_format == "chat" and (self.suspect_split or self.reference_file):
            raise UserError(
                "--prompt-format chat renders a subsample's prompts; a whole split or a file is read as "
                "plain prompts: drop --prompt-format"
            )
        if self.codec_context and self.format != "prompt":
            raise UserError(
                f"--codec-context {self.codec_context} runs CoDeC on prompts: pass --format prompt"
            )
        if self.codec_context is None:  # CoDeC reads prompts: on at the authors' k where it can run
            self.codec_context = 1 if self.format == "prompt" else 0
        if self.suspect_split and not (self.reference_split or self.reference_file):
            raise UserError(
                f"--suspect-split {self.suspect_split} needs a reference the model cannot have seen: "
                "--reference-split (another split of the task) or --reference-file (your own documents)"
            )
        if self.suspect_split and self.suspect_split == self.reference_split:
            raise UserError(f"--suspect-split and --reference-split both name {self.suspect_split!r}")

    def whole_split(self) -> bool:
        return bool(self.suspect_split or self.reference_split or self.reference_file)

    def documents(self) -> tuple[Spec, pd.DataFrame, dict[str, str]]:
        """The task, the suspect (split `test`) and reference (split `extra`) docs, checked big enough
        to test, and what each set is, in words."""
        spec = find_spec(self.task, self.include_path)
        if self.whole_split():
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
            sets = subsample_docs(spec, self, self.subsample)
            names = {s: s for s in SPLITS}
            check_sizes(len(sets["test"]), len(sets["extra"]))
        docs = pd.concat([sets[s].assign(split=s) for s in SPLITS], ignore_index=True)
        return spec, docs, names

    def sources(self, spec: Spec) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
        if self.suspect_split:
            suspect = documents.split_docs(spec, self.suspect_split, self.data_dir)
            suspect_name = f"the {self.suspect_split} split"
        else:
            suspect = subsample_docs(spec, self, self.subsample)["test"]
            suspect_name = f"test (subsample {self.subsample}, n {self.n})"
        suspect = documents.sample(suspect, self.suspect_n, self.seed, f"--suspect-n ({suspect_name})")
        if self.reference_file:
            reference, reference_name = documents.file_docs(spec, self.reference_file), self.reference_file
        elif self.reference_split:
            reference = documents.split_docs(spec, self.reference_split, self.data_dir)
            reference_name = f"the {self.reference_split} split"
        reference = documents.sample(
            reference, self.reference_n, self.seed, f"--reference-n ({reference_name})"
        )
        names = {
            "test": f"{suspect_name} ({len(suspect)} docs)",
            "extra": f"{reference_name} ({len(reference)} docs)",
        }
        return {"test": suspect, "extra": reference}, names


def scores_of(path: str, peft: str | None, spec: Spec, docs: pd.DataFrame, args: ExposureArgs):
    from contamination import doc_scores  # torch: imported where a model scores, not where settings parse

    masked = args.format == "raw" and not models.is_decoder(path)
    model, tokenizer = models.load_scoring_model(path, peft, masked=masked)
    if peft:
        adapters.check_record(peft, model)  # a tapt.json copied from another adapter names other documents
    if args.format == "prompt":
        k, seed = args.codec_context, args.seed
        return doc_scores.prompt_scores(
            model, tokenizer, spec, docs, args.batch_size, codec_context=k, seed=seed
        )
    return doc_scores.raw_scores(model, tokenizer, docs, masked, args.seed, args.batch_size)


def check(args: ExposureArgs) -> None:
    """Every input checked before any scoring: the models, the adapter's base, the tokenizers."""
    models.check_base(args.base, "--base")
    suspect = args.checkpoint or args.base
    if args.checkpoint:
        models.check_base(args.checkpoint, "--checkpoint")
        models.check_same_tokenizer(args.checkpoint, args.base)
    if args.peft:
        models.check_adapter_base(suspect, args.peft)
    if args.format == "prompt" and not models.is_decoder(suspect):
        raise UserError(
            f"--format prompt scores prompts with a causal LM, and {suspect} is an encoder; "
            "pass --format raw for a raw-text TAPT checkpoint of an encoder"
        )
    if not (args.checkpoint or args.peft or args.uncalibrated):
        print("note: no --checkpoint or --peft: the base is tested against itself (nothing can differ)")


def check_lengths(args: ExposureArgs, spec: Spec, docs: pd.DataFrame, names: dict[str, str]) -> None:
    """Prompt-format documents must fit the model's positions (the raw format keeps each text's first
    MAX_LENGTH tokens, as raw-text TAPT trains on them): a longer one is refused, named, before scoring."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(args.base)
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if args.format != "prompt" or not limit:
        return
    tokenizer = models.tokenizer(args.base)
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
    suspect = scores_of(args.checkpoint or args.base, args.peft, spec, docs, args)
    reference = None if args.uncalibrated else scores_of(args.base, None, spec, docs, args)
    texts = list(docs["text"]) if args.whole_split() else None  # a reference not drawn with the suspect's
    result = exposure_test(suspect, reference, args.text_score, args.seed, names, texts)
    per_doc = {"suspect": suspect.to_dict("list")}
    if reference is not None:
        per_doc["reference"] = reference.to_dict("list")
    return {
        **result,
        "documents": per_doc,
        "settings": asdict(args),
        "seconds": time.perf_counter() - start,
    }
