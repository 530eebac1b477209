"""The facts of one task, read from its lm-eval YAML (the single source of truth), what a tapt_* task does
for the design (harness.tasks.protocol.Spec), and the index of task YAMLs in the shipped folder and the
user's include folders."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from harness.core.plumbing import yaml_files
from harness.core.plumbing.errors import TaskError, UnknownTaskError, UserError
from harness.tasks import generative, prompts
from harness.tasks.data import apply_filters, load_pool, resolve_data_dir, to_canonical
from harness.tasks.subsample import DRAWS, SampleSettings, Subsample, draw, majority_share

TASKS_DIR = Path(__file__).resolve().parents[2] / "tasks_yaml"  # the package shipped beside harness/
TASK_PREFIX = "tapt_"
TEMPLATE = "_template_yaml"  # what every tapt_* task includes
SLUG = re.compile(r"[a-z][a-z0-9_]*")  # names the task (tapt_<slug>), its data folder and its results folder
TASK_TAG = "tapt_tasks"  # set by _template_yaml: every task that includes it joins the tapt_all group


@dataclass(frozen=True)
class TaskSpec:
    """What `dataset_kwargs` of a task YAML says about its dataset, classes and prompt."""

    slug: str
    hub_id: str | None = None  # None: a generative task whose pool a generator builds
    classes: tuple[str, ...] | None = None  # None: a generative task (its answers are generated)
    instruction: str = ""
    generator: str | None = None  # a built-in pool (harness.tasks.generative.GENERATORS)
    answer_field: str = "answer"  # a generative task's gold answer column
    hub_config: str | None = None
    hub_split: str = "train"
    text_field: str | tuple[str, ...] = "text"  # several fields are joined with "\n"
    label_field: str = "label"
    label_map: dict[Any, int] | None = None  # raw label -> class index
    max_chars: int | None = None  # keep texts shorter than this
    drop_empty: bool = False
    # a generative task's generation and filter, from its YAML (lm-eval's keys, not dataset_kwargs)
    answering: generative.Answering | None = dataclasses.field(default=None, compare=False)

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any], source: str) -> TaskSpec:
        """Build from a YAML's `dataset_kwargs`; `source` names the file in errors."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TaskError(
                f"{source}: unknown field(s) {unknown} in dataset_kwargs; allowed: {sorted(known)}"
            )
        generative = "classes" not in kwargs  # its answers are generated, not chosen among classes
        needed = ("slug",) if generative else ("slug", "hub_id", "classes", "instruction")
        missing = [f for f in needed if not kwargs.get(f)]
        if generative and not (kwargs.get("hub_id") or kwargs.get("generator")):
            missing.append("hub_id (or a generator)")
        if missing:
            raise TaskError(f"{source}: dataset_kwargs is missing {missing}")
        check_slug(str(kwargs["slug"]), source)
        kw = dict(kwargs)
        if not generative:
            kw["classes"] = tuple(str(c) for c in kw["classes"])
            twice = sorted({c for c in kw["classes"] if kw["classes"].count(c) > 1})
            if twice or len(kw["classes"]) < 2:
                why = f"names {', '.join(map(repr, twice))} more than once" if twice else "names fewer than 2"
                raise TaskError(
                    f"{source}: dataset_kwargs classes {why}: a class is one label's name, and two labels of "
                    "one name cannot be told apart; name each label once, at least two"
                )
        if isinstance(kw.get("text_field"), list):
            kw["text_field"] = tuple(kw["text_field"])
        return cls(**kw)

    @property
    def task_name(self) -> str:
        return TASK_PREFIX + self.slug

    @property
    def generative(self) -> bool:
        """Whether the model generates its answer (output_type generate_until) rather than choosing."""
        return self.classes is None

    # ---- the design's task protocol (harness.tasks.protocol.Spec) -----------------------------------------
    @property
    def target_delimiter(self) -> str:
        return prompts.ANSWER_DELIMITER

    def draw_rows(self, sample: SampleSettings, subsample: int) -> Subsample:
        """The pool rows of one subsample's splits (train stratified by label)."""
        return self._draw(load_pool(self, sample.data_dir), sample, subsample)

    def _draw(self, pool: pd.DataFrame, sample: SampleSettings, subsample: int) -> Subsample:
        return draw(pool["label"].to_numpy(), subsample, sample.m, sample.n, sample.seed, sample.train_draw)

    def subsample_docs(self, sample: SampleSettings, subsample: int) -> dict[str, pd.DataFrame]:
        pool = load_pool(self, sample.data_dir)  # read once: drawn from, then indexed
        sub = self._draw(pool, sample, subsample)
        return {
            s: prompts.rendered(
                self, pool.iloc[sub.rows(s)].assign(row=sub.rows(s)).reset_index(drop=True), sample
            )
            for s in DRAWS
        }

    def pool_docs(self, sample: SampleSettings) -> pd.DataFrame:
        return load_pool(self, sample.data_dir)

    def pool_majority(self, sample: SampleSettings) -> float:
        pool = load_pool(self, sample.data_dir)
        return majority_share(pool["answer"] if self.generative else pool["label"])

    def labeled_text(self, text: str, choice: str) -> str:
        return prompts.labeled(text, choice)

    def packed(self, docs: pd.DataFrame, answers: bool) -> str:
        if self.generative:
            gold = [c[0] for c in docs["choices"]] if answers else None
            return prompts.packed_answers(self, list(docs["text"]), gold)
        return prompts.packed(self, list(docs["text"]), [int(y) for y in docs["label"]] if answers else None)

    def split_names(self) -> list[str]:
        return [self.hub_split]  # the one pool, named as the hub names its split

    def split_docs(self, split: str, data_dir: str | None) -> pd.DataFrame:
        pool = load_pool(self, data_dir)
        return prompts.rendered(self, pool.assign(row=np.arange(len(pool))))

    def file_docs(self, raw: pd.DataFrame, path: Path) -> pd.DataFrame:
        """A file's rows read as the task's data file reads (its text and label fields)."""
        df = apply_filters(self, to_canonical(self, raw, str(path)))
        fields = [self.text_field] if isinstance(self.text_field, str) else list(self.text_field)
        missing = [c for c in ("text", "label") if c not in df.columns]
        if missing:
            raise UserError(
                f"{path}: missing column(s) for task {self.task_name}: needs "
                f"{[*fields, self.label_field]} or text and label; it has {list(raw.columns)}"
            )
        empty = df["text"].isna() | (df["text"].astype(str).str.strip() == "")
        if empty.any():
            raise UserError(f"{path}: {int(empty.sum())} empty text(s), first at row {int(empty.argmax())}")
        numbers = pd.to_numeric(df["label"], errors="coerce")
        flags = df["label"].map(lambda v: isinstance(v, bool))
        whole = numbers.notna() & (numbers == numbers.round()) & ~flags
        if not whole.all():
            i = int((~whole).argmax())
            raise UserError(
                f"{path}: row {i}: label {df['label'].tolist()[i]!r} is neither a class index (an integer) "
                f"nor one of the task's classes {list(self.classes)}; {int((~whole).sum())} row(s) like it"
            )
        docs = pd.DataFrame({"text": df["text"].astype(str), "label": numbers.astype("int64")})
        return prompts.rendered(self, docs.assign(row=np.arange(len(docs))))

    def eval_tasks(self, metadata: dict[str, Any], include_path: Sequence[str], test: pd.DataFrame):
        """(lm-eval's tasks, samples, {doc_id: (pool row, gold)}) that score `test`: the task's data hook
        draws the subsample split `metadata` names, so lm-eval scores all its docs."""
        rows = [(int(r), int(y)) for r, y in zip(test["row"], test["label"])]
        return lm_eval_tasks(include_path, metadata).load(self.task_name), None, dict(enumerate(rows))

    def lm_eval_args(self, split) -> list[str]:
        """lm_eval's flags that score a subsample's test split (`split`: a SplitSettings): the subsample
        as --metadata, and the task's folder as --include_path unless it is the shipped one (which the
        installed package adds to lm-eval's own)."""
        yaml_path = task_path(split.task, split.include_path).resolve()
        data_dir = resolve_data_dir(split.data_dir)
        metadata = {
            "data_dir": str(data_dir.resolve()) if data_dir else None,
            **{k: getattr(split, k) for k in ("m", "n", "seed", "subsample")},
            "split": "test",
        }
        if split.prompt_format != "plain":
            metadata |= {"prompt_format": split.prompt_format, "chat_model": split.chat_model}
        task = load_task_config(yaml_path)["task"]
        folder = [] if yaml_path.parent == TASKS_DIR else ["--include_path", str(yaml_path.parent)]
        return [*folder, "--tasks", task, "--metadata", json.dumps(metadata)]


def load_task_config(path: str | Path, _within: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The merged config of one task YAML: its `include`s first (relative to the file), its own keys
    over them; an include that comes back to a file it came from is an error naming the loop.

    Written here because lm-eval's loader is private API (`lm_eval.tasks._yaml_loader`, absent in
    some 0.4.x releases); we need only its `include` merge.
    """
    path = Path(path)
    if path.resolve() in _within:
        loop = " -> ".join(str(p) for p in (*_within, path.resolve()))
        raise TaskError(
            f"{_within[0]}: its includes come back to a file they came from ({loop}): break the loop"
        )
    if not path.is_file():
        raise TaskError(f"{path}: no such task YAML")
    stat = path.stat()
    cfg = copy.deepcopy(parsed(path, stat.st_mtime_ns, stat.st_size))  # its caller may change it
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
        merged.update(load_task_config(target, (*_within, path.resolve())))
    return merged | cfg


@functools.lru_cache(maxsize=256)
def parsed(path: Path, mtime_ns: int, size: int) -> dict[str, Any]:
    """One YAML file's own keys, parsed again only when it changes (every shipped task includes the
    template: one parse serves them all); not to be changed: load_task_config hands out copies."""
    try:
        cfg = yaml_files.load(path.read_text(), yaml_files.TaskYaml)
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as err:
        raise TaskError(f"{path}: malformed YAML: {err}") from err
    if not isinstance(cfg, dict):
        raise TaskError(f"{path}: malformed YAML: expected a mapping of keys, got {type(cfg).__name__}")
    return cfg


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
    output = cfg.get("output_type")
    if spec.generative != (output == generative.GENERATE):
        said = "names no classes" if spec.generative else "names classes"
        raise TaskError(
            f"{source}: dataset_kwargs {said} and output_type is {output!r}: a multiple-choice task names "
            f"its classes, a {generative.GENERATE} task names none (its answers are generated)"
        )
    if spec.generative:
        problem = generative.metric_problem(cfg.get("metric_list"), spec.task_name)
        if problem:
            raise TaskError(f"{source}: {problem}")
        answering = generative.Answering.of(cfg.get("generation_kwargs"), cfg.get("filter_list"))
        return dataclasses.replace(spec, answering=answering)
    choices = cfg.get("doc_to_choice")
    if choices is not None and tuple(map(str, choices)) != spec.classes:
        raise TaskError(
            f"{source}: doc_to_choice {choices} differs from dataset_kwargs.classes "
            f"{list(spec.classes)}; write `doc_to_choice: *classes`"
        )
    return spec


GENERATIVE_TAG = "tapt_generative"  # a generative tapt_* task's tag: a task of the design, not of tapt_all


def tags_of(cfg: dict[str, Any]) -> list:
    tags = cfg.get("tag") or []
    return tags if isinstance(tags, list) else [tags]


def is_task(cfg: dict[str, Any]) -> bool:
    return bool({TASK_TAG, GENERATIVE_TAG} & set(tags_of(cfg)))


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
        paths = sorted(folder.glob("*.yaml"))
        stamped = tuple((p, p.stat().st_mtime_ns, p.stat().st_size) for p in paths)
        for path, task in zip(paths, task_names(stamped)):
            if task is None:
                continue
            slug = task.removeprefix(TASK_PREFIX)
            if slug in found:
                raise TaskError(
                    f"task {task} is defined twice: {found[slug]} and {path}; "
                    "rename one (its `task` and `dataset_kwargs.slug`) or drop one folder"
                )
            found[slug] = path
    return found


@functools.lru_cache(maxsize=64)
def task_names(stamped: tuple[tuple[Path, int, int], ...]) -> tuple[str | None, ...]:
    """The task each YAML defines (None: not a task, or unreadable), read again only when a file changes
    (`stamped`: each path with its modification time and size): a run looks its tasks up more than once."""
    out = []
    for path, *_ in stamped:
        try:
            cfg = load_task_config(path)
        except TaskError:
            out.append(None)
            continue
        out.append(cfg["task"] if is_task(cfg) and isinstance(cfg.get("task"), str) else None)
    return tuple(out)


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
        raise UnknownTaskError(
            f"unknown task {task!r}: no task YAML with `task: {TASK_PREFIX}{slug}` in {folders}; "
            f"add its folder with --include-path (known: {', '.join(sorted(files))}){broken}"
        )
    return files[slug]


def load_spec(task: str, include_path: Sequence[str] = ()) -> TaskSpec:
    """TaskSpec of a task given as slug, task name or YAML path."""
    path = task_path(task, include_path)
    return spec_from_config(load_task_config(path), str(path))


def all_slugs(include_path: Sequence[str] = ()) -> list[str]:
    """The classification tasks (tagged tapt_tasks): what a config's `tasks: all` runs."""
    files = task_files(include_path)
    return sorted(s for s, p in files.items() if TASK_TAG in tags_of(load_task_config(p)))


def validation_targets(target: Path) -> list[Path]:
    """A YAML, or a folder's task YAMLs (a group's is not one): those tagged tapt_tasks, any other lm-eval
    task (one the design cannot run is reported), and those that do not load (to report)."""
    if not target.is_dir():
        return [target]
    found = []
    for path in sorted(target.glob("*.yaml")):
        try:
            cfg = load_task_config(path)
            if is_task(cfg) or ("task" in cfg and "group" not in cfg):  # a task it cannot run is said
                found.append(path)
        except TaskError:
            found.append(path)
    return found


def defined_twice(
    paths: Sequence[Path], include_path: Sequence[str] = ()
) -> dict[Path, tuple[str, list[Path]]]:
    """Each of `paths` whose task name another YAML (among them, the shipped tasks or the include
    folders) defines too: its name and those others. lm-eval would load one of them and skip the rest."""
    folders = [*task_folders(include_path), *{p.parent for p in paths}]
    names: dict[Path, str] = {}
    for path in {*paths, *(y for f in folders for y in f.glob("*.yaml"))}:
        try:
            name = load_task_config(path).get("task")
        except TaskError:
            continue
        if isinstance(name, str):
            names[path.resolve()] = name
    out = {}
    for path in paths:
        name = names.get(path.resolve())
        others = sorted(p for p, n in names.items() if n == name and p != path.resolve())
        if name and others:
            out[path] = (name, others)
    return out


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
