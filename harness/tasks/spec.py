"""The facts of one task, read from its lm-eval YAML (the single source of truth), and the index of
task YAMLs in the shipped folder and the user's include folders."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.core.errors import TaskError

TASKS_DIR = Path(__file__).resolve().parents[2] / "tasks_yaml"  # the package shipped beside harness/
TASK_PREFIX = "tapt_"
TEMPLATE = "_template_yaml"  # what every tapt_* task includes
SLUG = re.compile(r"[a-z][a-z0-9_]*")  # names the task (tapt_<slug>), its data folder and its results folder
TASK_TAG = "tapt_tasks"  # set by _template_yaml: every task that includes it joins the tapt_all group


@dataclass(frozen=True)
class TaskSpec:
    """What `dataset_kwargs` of a task YAML says about its dataset, classes and prompt."""

    slug: str
    hub_id: str
    classes: tuple[str, ...]
    instruction: str
    hub_config: str | None = None
    hub_split: str = "train"
    text_field: str | tuple[str, ...] = "text"  # several fields are joined with "\n"
    label_field: str = "label"
    label_map: dict[Any, int] | None = None  # raw label -> class index
    max_chars: int | None = None  # keep texts shorter than this
    drop_empty: bool = False

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any], source: str) -> TaskSpec:
        """Build from a YAML's `dataset_kwargs`; `source` names the file in errors."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TaskError(
                f"{source}: unknown field(s) {unknown} in dataset_kwargs; allowed: {sorted(known)}"
            )
        missing = [f for f in ("slug", "hub_id", "classes", "instruction") if not kwargs.get(f)]
        if missing:
            raise TaskError(f"{source}: dataset_kwargs is missing {missing}")
        check_slug(str(kwargs["slug"]), source)
        kw = dict(kwargs)
        kw["classes"] = tuple(str(c) for c in kw["classes"])
        if isinstance(kw.get("text_field"), list):
            kw["text_field"] = tuple(kw["text_field"])
        return cls(**kw)

    @property
    def task_name(self) -> str:
        return TASK_PREFIX + self.slug


class _Loader(yaml.SafeLoader):
    """YAML with lm-eval's `!function` tag kept as its text (we read facts, never call functions)."""


_Loader.add_constructor("!function", lambda loader, node: f"!function {loader.construct_scalar(node)}")


def load_task_config(path: str | Path) -> dict[str, Any]:
    """The merged config of one task YAML: its `include`s first (relative to the file), its own keys
    over them.

    Written here because lm-eval's loader is private API (`lm_eval.tasks._yaml_loader`, absent in
    some 0.4.x releases); we need only its `include` merge.
    """
    path = Path(path)
    if not path.is_file():
        raise TaskError(f"{path}: no such task YAML")
    try:
        cfg = yaml.load(path.read_text(), Loader=_Loader)
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as err:
        raise TaskError(f"{path}: malformed YAML: {err}") from err
    if not isinstance(cfg, dict):
        raise TaskError(f"{path}: malformed YAML: expected a mapping of keys, got {type(cfg).__name__}")
    merged: dict[str, Any] = {}
    includes = cfg.pop("include", [])
    for inc in includes if isinstance(includes, list) else [includes]:
        target = path.parent / inc  # an absolute `inc` replaces the folder
        if not target.is_file():
            raise TaskError(
                f"{path}: `include: {inc}` names {target}, which does not exist (lm-eval resolves an "
                f"include next to the file). The template ships with tapt-bench: write `include: "
                f"{TASKS_DIR / TEMPLATE}`, or let `tapt-bench tasks new SLUG --out {path.parent}` write a "
                "new task file with it"
            )
        merged.update(load_task_config(target))
    return merged | cfg


def check_slug(slug: str, source: str) -> None:
    """A slug is lowercase letters, digits and underscores, starting with a letter: it becomes a task
    name, a file name and a folder name on every system."""
    if not SLUG.fullmatch(slug):
        suggestion = re.sub(r"[^a-z0-9_]+", "_", slug.lower()).strip("_") or "my_task"
        if not suggestion[0].isalpha():
            suggestion = "t_" + suggestion
        raise TaskError(
            f"{source}: slug {slug!r} is not valid: use lowercase letters, digits and underscores, starting "
            f"with a letter (it names the task tapt_<slug> and its data folder), e.g. {suggestion!r}"
        )


def spec_from_config(cfg: dict[str, Any], source: str) -> TaskSpec:
    """Read the TaskSpec of a loaded task config and check it agrees with the lm-eval fields."""
    if not isinstance(cfg.get("dataset_kwargs"), dict):
        raise TaskError(f"{source}: no `dataset_kwargs` mapping with the task's facts")
    spec = TaskSpec.from_kwargs(cfg["dataset_kwargs"], source)
    if cfg.get("task") != spec.task_name:
        raise TaskError(f"{source}: `task` is {cfg.get('task')!r}, expected {spec.task_name!r}")
    choices = cfg.get("doc_to_choice")
    if choices is not None and tuple(map(str, choices)) != spec.classes:
        raise TaskError(
            f"{source}: doc_to_choice {choices} differs from dataset_kwargs.classes "
            f"{list(spec.classes)}; write `doc_to_choice: *classes`"
        )
    return spec


def is_task(cfg: dict[str, Any]) -> bool:
    tags = cfg.get("tag") or []
    return TASK_TAG in (tags if isinstance(tags, list) else [tags])


def task_folders(include_path: Sequence[str] = ()) -> list[Path]:
    """The shipped tasks folder, then the user's include folders (each checked to exist)."""
    folders = [TASKS_DIR]
    for folder in map(Path, include_path):
        if not folder.is_dir():
            raise TaskError(f"include path {folder}: no such folder of task YAMLs")
        if folder.resolve() != TASKS_DIR.resolve():
            folders.append(folder)
    return folders


def task_files(include_path: Sequence[str] = ()) -> dict[str, Path]:
    """slug -> YAML of every task (a YAML tagged tapt_tasks) in the task folders.

    A task defined by two files is an error naming both. A broken YAML is skipped here and
    reported by `tapt-bench tasks validate`.
    """
    found: dict[str, Path] = {}
    for folder in task_folders(include_path):
        for path in sorted(folder.glob("*.yaml")):
            try:
                cfg = load_task_config(path)
            except TaskError:
                continue
            if not is_task(cfg) or not isinstance(cfg.get("task"), str):
                continue
            slug = cfg["task"].removeprefix(TASK_PREFIX)
            if slug in found:
                raise TaskError(
                    f"task {cfg['task']} is defined twice: {found[slug]} and {path}; "
                    "rename one (its `task` and `dataset_kwargs.slug`) or drop one folder"
                )
            found[slug] = path
    return found


def unreadable(include_path: Sequence[str] = ()) -> list[TaskError]:
    """The errors of the YAMLs in the task folders that cannot be read (task_files skips them)."""
    found = []
    for folder in task_folders(include_path):
        for path in sorted(folder.glob("*.yaml")):
            try:
                load_task_config(path)
            except TaskError as err:
                found.append(err)
    return found


def task_path(task: str, include_path: Sequence[str] = ()) -> Path:
    """YAML path of a task given as slug, task name or path."""
    if task.endswith(".yaml"):
        return Path(task)
    files = task_files(include_path)
    slug = task.removeprefix(TASK_PREFIX)
    if slug not in files:
        folders = ", ".join(map(str, task_folders(include_path)))
        broken = "".join(f"\n  unreadable, and it may be the task: {err}" for err in unreadable(include_path))
        raise TaskError(
            f"unknown task {task!r}: no task YAML with `task: {TASK_PREFIX}{slug}` in {folders}; "
            f"add its folder with --include-path (known: {', '.join(sorted(files))}){broken}"
        )
    return files[slug]


def load_spec(task: str, include_path: Sequence[str] = ()) -> TaskSpec:
    """TaskSpec of a task given as slug, task name or YAML path."""
    path = task_path(task, include_path)
    return spec_from_config(load_task_config(path), str(path))


def all_slugs(include_path: Sequence[str] = ()) -> list[str]:
    return sorted(task_files(include_path))


def validation_targets(target: Path) -> list[Path]:
    """A YAML, or a folder's task YAMLs: those tagged tapt_tasks, plain multiple-choice lm-eval tasks,
    and those that do not load (to report)."""
    if not target.is_dir():
        return [target]
    found = []
    for path in sorted(target.glob("*.yaml")):
        try:
            cfg = load_task_config(path)
            if is_task(cfg) or (cfg.get("output_type") == "multiple_choice" and "task" in cfg):
                found.append(path)
        except TaskError:
            found.append(path)
    return found


def lm_eval_tasks(include_path: Sequence[str], metadata: dict[str, Any]):
    """lm-eval's TaskManager over the task folders, with `metadata` for every task.

    lm-eval 0.4.13 indexes each folder on its own and lets a later folder's tag replace an earlier
    one's (it warns "Task 'tapt_tasks' ... overrides"); we load tasks by name, so silence that.
    """
    import logging

    from lm_eval.tasks import TaskManager

    logging.getLogger("lm_eval.tasks._index").setLevel(logging.ERROR)
    # lm-eval tells the user of every task with a custom_dataset hook that `--metadata` takes its
    # kwargs: tapt-bench sets them itself, so the banner would only mislead
    logging.getLogger("lm_eval.api.task").setLevel(logging.ERROR)
    folders = {str(f.resolve()): None for f in task_folders(include_path)}
    return TaskManager(include_path=list(folders), include_defaults=False, metadata=metadata)
