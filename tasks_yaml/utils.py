"""lm-eval hooks for the tapt_* tasks: the `custom_dataset` loader.

lm-eval calls it with the task's `metadata` (including `--metadata` and `--model_args`) and its
`dataset_kwargs` (the task's facts) merged into keyword arguments.
"""

import dataclasses

import datasets

from harness.docs import DEFAULTS, subsample_docs
from harness.spec import TaskError, TaskSpec
from harness.subsample import SPLITS

FACTS = {f.name for f in dataclasses.fields(TaskSpec)}


def load_docs(**kwargs) -> datasets.DatasetDict:
    """`test`: the docs of metadata `split` (default: the test subsample); `train`: the labeled train subsample."""
    source = kwargs.get("config_source", "task YAML")
    spec = TaskSpec.from_kwargs({k: v for k, v in kwargs.items() if k in FACTS}, source)
    split = kwargs.get("split", "test")
    if split not in SPLITS:
        raise TaskError(f"task {spec.task_name}: metadata split must be one of {SPLITS}, got {split!r}")
    run = {k: int(kwargs.get(k, v)) for k, v in DEFAULTS.items()}
    docs = subsample_docs(spec, kwargs.get("data_dir"), **run)
    return datasets.DatasetDict(
        {name: datasets.Dataset.from_pandas(docs[s]) for name, s in (("train", "train"), ("test", split))}
    )
