"""End-to-end checks of a task YAML: config, data, subsample and the prompt lm-eval renders."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from harness.core.plumbing.errors import TaskError, named
from harness.core.plumbing.settings import pick
from harness.tasks import generative
from harness.tasks.data import load_pool
from harness.tasks.spec import is_task, lm_eval_tasks, load_task_config, spec_from_config
from harness.tasks.subsample import SampleSettings, draw

EXTRA_KEYS = {"include", "group", "group_alias"}  # lm-eval YAML keys outside TaskConfig


def build_task(path: Path, metadata: dict[str, Any], include_path: list[str] = ()):
    """The lm-eval task of a YAML, built by lm-eval's TaskManager from the YAML's folder and the task
    folders, its docs loaded through our hook with `metadata`."""
    name = load_task_config(path)["task"]
    manager = lm_eval_tasks([*include_path, str(Path(path).parent)], {**metadata, "config_source": str(path)})
    return manager.load(name)["tasks"][name]


def render_first(task) -> dict[str, Any]:
    """What lm-eval scores for the first eval doc: prompt, choices (with delimiter) and target; for a
    generative task its prompt, its gold answer, how lm-eval generates and the filters it reads the answer
    with."""
    doc = next(iter(task.test_docs()))
    if task.OUTPUT_TYPE == "generate_until":
        filters = [f["filter"] for f in task.config.filter_list or []]
        return {
            "prompt": task.doc_to_text(doc),
            "target": str(task.doc_to_target(doc)),
            "generation_kwargs": task.config.generation_kwargs,
            "filters": filters,
        }
    choices = task.doc_to_choice(doc)
    return {
        "prompt": task.doc_to_text(doc),
        "choices": choices,
        "target": choices[task.doc_to_target(doc)],
        "delimiter": task.config.target_delimiter,
    }


def lm_eval_task_problems(path: Path, cfg: dict[str, Any], sample: SampleSettings) -> list[str]:
    """A plain lm-eval task YAML: lm-eval loads it, it is multiple choice, its pool holds the design."""
    from harness.tasks.lm_eval_spec import answering_problems, load_lm_eval_spec
    from harness.tasks.protocol import draw_rows

    name = cfg.get("task")
    if "group" in cfg:
        return [
            f"{path}: a group YAML (group: {cfg['group']}): the design scores one task at a time; "
            "validate and run each of its tasks by name"
        ]
    if not isinstance(name, str):
        return [f"{path}: no `task` name"]
    kind = cfg.get("output_type", "generate_until")  # lm-eval's own default
    if kind not in ("multiple_choice", generative.GENERATE):
        return [
            f"{path}: output_type {kind!r}: the design scores a task's answers, so it runs multiple_choice "
            f"and {generative.GENERATE} tasks; write the task as one of those"
        ]
    try:
        spec = load_lm_eval_spec(name, [*sample.include_path, str(Path(path).parent)])
        if spec is None:
            return [f"{path}: lm-eval does not find task {name!r} in {Path(path).parent}"]
        draw_rows(spec, sample, 0)
        return answering_problems(spec)  # the run's generation settings and filter, on the gold answers
    except TaskError as err:
        return [str(err)]
    except Exception as err:  # lm-eval's own loading errors, and the design's, are all findings
        return [f"task {name}: {named(err)}"]
    return []


# what `tapt-bench tasks new` writes for the user to replace (its template reads them from here)
PLACEHOLDERS = {
    "classes": ("first class", "second class"),
    "instruction": "The text is ... Answer with its ...",
    "hub_id": "someone/",
}


def unedited(spec, path: Path) -> list[str]:
    """The dataset_kwargs a `tasks new` file still holds as written: they describe no real task."""
    left = [k for k in ("classes", "instruction") if getattr(spec, k) == PLACEHOLDERS[k]]
    if not left:  # a placeholder hub_id alone is fine: offline data needs none
        return []
    left += ["hub_id"] if spec.hub_id.startswith(PLACEHOLDERS["hub_id"]) else []
    return [
        f"{path}: dataset_kwargs {', '.join(left)} still hold what `tasks new` wrote "
        f"({', '.join(repr(getattr(spec, k)) for k in left)}); replace them with your task's"
    ]


def problems(path: Path, sample: SampleSettings) -> list[str]:
    """Every problem found in one task YAML; empty when it is ready to use."""
    from lm_eval.api.task import TaskConfig

    try:
        cfg = load_task_config(path)
    except TaskError as err:
        return [str(err)]
    unknown = sorted(set(cfg) - {f.name for f in dataclasses.fields(TaskConfig)} - EXTRA_KEYS)
    found = [f"{path}: unknown field(s) {unknown} (not lm-eval task options)"] if unknown else []
    if not is_task(cfg):
        return found + lm_eval_task_problems(path, cfg, sample)
    try:
        spec = spec_from_config(cfg, str(path))
    except TaskError as err:
        return found + [str(err)]
    found += unedited(spec, path)
    try:
        pool = load_pool(spec, sample.data_dir)
    except TaskError as err:
        return found + [str(err)]
    try:
        draw(pool["label"].to_numpy(), 0, sample.m, sample.n, sample.seed, sample.train_draw)
    except TaskError as err:
        found.append(f"task {spec.task_name}: {err}")
    if found:
        return found
    try:
        render_first(build_task(path, pick(sample, SampleSettings), sample.include_path))
    except Exception as err:  # anything lm-eval raises while building or rendering is a finding
        found.append(f"task {spec.task_name}: lm-eval cannot render the prompt: {named(err)}")
    return found
