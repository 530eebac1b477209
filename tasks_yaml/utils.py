"""lm-eval hooks for the tapt_* tasks: the `custom_dataset` loader.

lm-eval calls it with the task's `metadata` (including `--metadata` and `--model_args`) and its
`dataset_kwargs` (the task's facts) merged into keyword arguments. Importing it changes nothing in
the lm-eval process: a bad setting is raised as an error whose message names the fix.
"""

import dataclasses

import datasets

from harness.core.errors import UserError
from harness.core.settings import field_names
from harness.tasks.spec import TaskSpec
from harness.tasks.splits import SplitSettings, subsample_docs

FACTS = {f.name for f in dataclasses.fields(TaskSpec)}
METADATA = set(field_names(SplitSettings)) - {"task"}  # what --metadata may set


def load_docs(**kwargs) -> datasets.DatasetDict:
    """`test`: the docs of metadata `split` (default: the test subsample); `train`: the labeled
    train subsample."""
    source = kwargs.get("config_source", "task YAML")
    spec = TaskSpec.from_kwargs({k: v for k, v in kwargs.items() if k in FACTS}, source)
    given = {k: v for k, v in kwargs.items() if k in METADATA}
    try:
        sample = SplitSettings(task=spec.slug, **given)
        docs = subsample_docs(spec, sample, sample.subsample)
    except UserError as err:
        what = f"--metadata {err.key!r} {err.problem}" if getattr(err, "key", None) else str(err)
        raise type(err)(
            f"task {spec.task_name}: {what}\n(lm_eval sets the subsample with --metadata, e.g. "
            f'--metadata \'{{"data_dir": "DIR", "m": 50, "n": 50, "subsample": 0}}\'; now {given})'
        ) from None
    return datasets.DatasetDict(
        {
            name: datasets.Dataset.from_pandas(docs[s])
            for name, s in (("train", "train"), ("test", sample.split))
        }
    )
