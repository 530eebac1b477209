"""lm-eval hooks for the tapt_* tasks: the `custom_dataset` loader.

lm-eval calls it with the task's `metadata` (including `--metadata` and `--model_args`) and its
`dataset_kwargs` (the task's facts) merged into keyword arguments. A bad setting is raised as an
error whose message names the fix. lm_eval's CLI catches no task error, so importing this module
changes one thing in its process: an uncaught UserError prints its message alone, without the
traceback through lm-eval (TAPT_BENCH_TRACEBACK=1 shows it). Code that calls lm-eval and catches
the error sees it as before.
"""

import dataclasses
import difflib

import datasets
import numpy as np

from harness.core.engine import models
from harness.core.plumbing.errors import UserError, print_user_errors
from harness.core.plumbing.settings import field_names
from harness.tasks import adapters
from harness.tasks.protocol import SplitSettings, subsample_docs
from harness.tasks.spec import TaskSpec

FACTS = {f.name for f in dataclasses.fields(TaskSpec)}
METADATA = set(field_names(SplitSettings)) - {"task"}  # what --metadata may set


print_user_errors("lm_eval")


def misspelt(kwargs: dict, task: str) -> None:
    """Refuse a key that reads as a misspelt --metadata key (`subsampel`, `nn`): lm-eval passes the model's
    own arguments here too, so a key unknown to the task is refused only where it is near one of ours (a
    short key: one edit away)."""
    for key in sorted(set(kwargs) - FACTS - METADATA):
        fact = difflib.get_close_matches(key, sorted(FACTS), n=1, cutoff=0.8)
        if fact:  # a task YAML's dataset_kwargs key, misspelt: tapt-bench's own loader refuses it too
            raise UserError(
                f"task {task}: unknown dataset_kwargs key {key!r} in its YAML; did you mean {fact[0]!r}? "
                "(`tapt-bench tasks validate` checks the file)"
            )
        near = difflib.get_close_matches(key, sorted(METADATA), n=1, cutoff=0.75)
        near = near or [k for k in sorted(METADATA) if len(key) <= 3 and one_edit(key, k)][:1]
        if near:
            raise UserError(
                f"task {task}: unknown --metadata key {key!r}; did you mean {near[0]!r}? (the keys: "
                f"{', '.join(sorted(METADATA))})"
            )


def one_edit(a: str, b: str) -> bool:
    """Whether two short keys differ by one letter added, dropped or changed."""
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    return difflib.SequenceMatcher(None, a, b).ratio() >= 2 * (max(len(a), len(b)) - 1) / (len(a) + len(b))


TRAINED = adapters.TRAINED  # what an adapter tapt-bench wrote records of its draw


def trained_for(peft, given: dict, task: str, slug: str) -> dict:
    """The draw an adapter was trained on, as lm-eval's --metadata defaults (harness.tasks.adapters)."""
    return adapters.trained_for(peft, given, task, slug, flag="--metadata")


def choice_tokens(docs, delimiter: str, kwargs: dict) -> list[list[int]] | None:
    """Per document, each choice's continuation length in tokens as lm-eval's causal models split it:
    the study's rule (the largest mean log-prob a token) reads it. None where the scored model's tokenizer
    cannot be loaded here (a model that is not Hugging Face's): the rule is then not printed."""
    from harness.core.engine.loglik import encode_pair

    name = kwargs.get("tokenizer") or kwargs.get("pretrained")
    try:
        tok = models.tokenizer(str(name or models.adapter_base(kwargs.get("peft"))))
    except Exception:  # no HF tokenizer for this model: lm-eval's acc alone
        return None
    return [
        [len(encode_pair(tok, prompt, delimiter + choice)[1]) for choice in choices]
        for prompt, choices in zip(docs["prompt"], docs["choices"])
    ]


def process_results(doc: dict, results) -> dict:
    """lm-eval's `acc` (the choice of the largest summed log-prob) and, where the docs carry each choice's
    token count, the study's `mean_token` (the largest mean log-prob a token, kddubey/pretrain-on-test
    _dum.py:363-385), as the grid reads it."""
    lls = np.array([ll for ll, _ in results], float)
    out = {"acc": float(int(lls.argmax()) == doc["label"])}
    if doc.get("choice_tokens"):
        out["mean_token"] = float(int((lls / np.array(doc["choice_tokens"], float)).argmax()) == doc["label"])
    return out


def load_docs(**kwargs) -> datasets.DatasetDict:
    """`test`: the docs of metadata `split` (default: the test subsample); `train`: the labeled
    train subsample. An adapter tapt-bench wrote is scored on the draw and prompt format it was trained
    on (trained_for)."""
    source = kwargs.get("config_source", "task YAML")
    spec = TaskSpec.from_kwargs({k: v for k, v in kwargs.items() if k in FACTS}, source)
    given = {k: v for k, v in kwargs.items() if k in METADATA}
    misspelt(kwargs, spec.task_name)
    given = trained_for(kwargs.get("peft"), given, spec.task_name, spec.slug) | given
    try:
        sample = SplitSettings(task=spec.slug, **given)
        if sample.chat_model is None and sample.prompt_format == "chat":  # the scored model's template
            sample.default_chat_model(kwargs.get("pretrained") or models.adapter_base(kwargs.get("peft")))
        docs = subsample_docs(spec, sample, sample.subsample)
    except UserError as err:
        what = f"--metadata {err.key!r} {err.problem}" if getattr(err, "key", None) else str(err)
        what = what if what.startswith(f"task {spec.task_name}") else f"task {spec.task_name}: {what}"
        raise type(err)(
            f"{what}\n(lm_eval sets the subsample with --metadata, e.g. "
            f'--metadata \'{{"data_dir": "DIR", "m": 50, "n": 50, "subsample": 0}}\'; now {given})'
        ) from None
    adapters.check_rows(kwargs.get("peft"), docs)  # the draw the record names gives the rows it lists
    test = docs[sample.split]
    if (kwargs.get("pretrained") or kwargs.get("peft")) and not spec.generative:  # the study's rule too
        counts = choice_tokens(test, spec.target_delimiter, kwargs)
        test = test if counts is None else test.assign(choice_tokens=counts)
    return datasets.DatasetDict(
        {"train": datasets.Dataset.from_pandas(docs["train"]), "test": datasets.Dataset.from_pandas(test)}
    )
