"""The facts of one task, read from its lm-eval YAML (the single source of truth)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import TaskError

TASKS_DIR = Path(__file__).resolve().parent.parent / "tasks_yaml"
TASK_PREFIX = "tapt_"


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
    label_map: dict[Any, int] | None = None  # raw hub label -> class index
    max_chars: int | None = None  # keep texts shorter than this
    drop_empty: bool = False

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any], source: str) -> "TaskSpec":
        """Build from a YAML's `dataset_kwargs`; `source` names the file in errors."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TaskError(
                f"{source}: unknown field(s) {unknown} in dataset_kwargs; "
                f"allowed: {sorted(known)}"
            )
        missing = [f for f in ("slug", "hub_id", "classes", "instruction") if not kwargs.get(f)]
        if missing:
            raise TaskError(f"{source}: dataset_kwargs is missing {missing}")
        kw = dict(kwargs)
        kw["classes"] = tuple(str(c) for c in kw["classes"])
        if isinstance(kw.get("text_field"), list):
            kw["text_field"] = tuple(kw["text_field"])
        return cls(**kw)

    @property
    def task_name(self) -> str:
        return TASK_PREFIX + self.slug


def load_task_config(path: str | Path) -> dict[str, Any]:
    """The merged lm-eval config of one task YAML (includes resolved, functions not imported)."""
    import yaml
    from lm_eval.tasks._yaml_loader import load_yaml

    path = Path(path)
    if not path.is_file():
        raise TaskError(f"{path}: no such task YAML")
    try:
        return load_yaml(path, resolve_func=False)
    except (yaml.YAMLError, ValueError, OSError) as err:
        raise TaskError(f"{path}: malformed YAML: {err}") from err


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


def task_path(task: str, tasks_dir: Path = TASKS_DIR) -> Path:
    """YAML path of a task given as slug, task name or path."""
    if task.endswith(".yaml"):
        return Path(task)
    slug = task.removeprefix(TASK_PREFIX)
    path = tasks_dir / f"{TASK_PREFIX}{slug}.yaml"
    if not path.is_file():
        raise TaskError(
            f"unknown task {task!r}: no {path.name} in {tasks_dir} "
            f"(known: {', '.join(all_slugs(tasks_dir))})"
        )
    return path


def load_spec(task: str, tasks_dir: Path = TASKS_DIR) -> TaskSpec:
    """TaskSpec of a task given as slug, task name or YAML path."""
    path = task_path(task, tasks_dir)
    return spec_from_config(load_task_config(path), str(path))


def all_slugs(tasks_dir: Path = TASKS_DIR) -> list[str]:
    return sorted(p.stem.removeprefix(TASK_PREFIX) for p in tasks_dir.glob(f"{TASK_PREFIX}*.yaml")
                  if p.stem != "tapt_all")
