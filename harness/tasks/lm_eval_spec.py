"""Any lm-eval multiple-choice task as a task of the design: its own docs, prompt, choices and metrics,
found through lm-eval's TaskManager (its built-in tasks and the include folders).

The pool is the task's evaluation docs (`test_split`, else `validation_split`) after its
`process_docs`; a document's TAPT text is what lm-eval shows the model zero-shot (`description`
and `doc_to_text`); its choices are `doc_to_choice`, per document where they vary; its label is the
gold index of `doc_to_target`. Scoring is lm-eval's own, on exactly the subsample's test docs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.core.design import seeds
from harness.core.plumbing.errors import SettingsError, TaskError, UserError, named
from harness.tasks import generative
from harness.tasks.subsample import (
    DRAWS,
    SampleSettings,
    Subsample,
    draw_eval,
    majority_share,
    train_counts,
)

SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
SPLIT_KEYS = {"test": "test_split", "validation": "validation_split", "train": "training_split"}


def answering_problems(spec) -> list[str]:
    """What keeps a generative lm-eval task's answers from being read as a run reads them, on up to 200
    of its gold answers (`tasks validate` and every run check it): empty for any other task."""
    if not (isinstance(spec, LmEvalSpec) and spec.generative):
        return []
    gold = [str(a) for a in spec.pool()["answer"].head(200)]
    return generative.answering_problems(spec.answering, gold, spec.task_name)


def chat_problem(task_name: str) -> str:
    """Why prompt_format chat cannot read an lm-eval task (it renders its own prompt)."""
    return (
        f"chat renders a tapt_* task's prompt; {task_name} is an lm-eval task with its own (lm_eval's "
        "--apply_chat_template): set prompt_format: plain (on the command line: --prompt-format plain)"
    )


def folder_name(name: str) -> str:
    """A results folder for a task name: itself where it is safe, else with the unsafe characters
    replaced and a short hash of the name (two names never share a folder)."""
    safe = SAFE.sub("_", name)
    return safe if safe == name else f"{safe}-{hashlib.sha256(name.encode()).hexdigest()[:6]}"


@cache
def _manager(include_path: tuple[str, ...], defaults: bool):
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=list(include_path) or None, include_defaults=defaults)


def find_task(name: str, include_path: Sequence[str] = ()):
    """lm-eval's loaded task `name`: from the include folders first (fast), else lm-eval's own tasks;
    None where neither has it. A group or tag is a TaskError."""
    folders = tuple(map(str, include_path))
    # the include folders alone, then lm-eval's own tasks alone: indexing lm-eval's own task files takes
    # seconds, so that index is built once per process, whatever the include folders
    for key in [(folders, False)] * bool(folders) + [((), True)]:
        manager = _manager(*key)  # built only when the folders before it lack the task
        if name in manager.all_groups or name in manager.all_tags:
            kind = "group" if name in manager.all_groups else "tag"
            raise TaskError(
                f"task {name!r} is an lm-eval {kind}, not a task: the design scores one task at a time; "
                "name each of its subtasks instead (`lm_eval ls tasks` lists them)"
            )
        if name in manager.all_subtasks:
            try:
                loaded = manager.load([name])
            except (ConnectionError, OSError) as err:  # its dataset is on the hub, and the hub is not here
                raise TaskError(
                    f"task {name!r}: lm-eval cannot load its dataset ({named(err)}). It is "
                    "lm-eval's own task, whose data lm-eval fetches from the Hugging Face hub: run with hub "
                    "access (HF_HUB_OFFLINE unset), or write the task as a YAML over a local file "
                    "(dataset_path: json, dataset_kwargs: {data_files: ...}) in a folder given with "
                    "--include-path"
                ) from None
            except Exception as err:  # lm-eval's own build of the YAML (a Jinja template, a target)
                why = build_problem(manager, name) or f"lm-eval cannot build it ({named(err)}); fix its YAML"
                raise TaskError(f"task {name!r}: {why}") from None
            return loaded["tasks"][name] if "tasks" in loaded else loaded[name]
    return None


def build_problem(manager, name: str) -> str | None:
    """What in a task's YAML (its includes in) keeps lm-eval from building it, where lm-eval's own error
    does not say: a generative task without doc_to_target, a local data file that holds nothing."""
    from harness.tasks.spec import load_task_config

    try:
        entry = manager.task_index[name]
        path = entry["yaml_path"] if isinstance(entry, dict) else entry.yaml_path
        cfg = load_task_config(path)
    except Exception:  # lm-eval's own index, or a YAML we cannot read: lm-eval's error is the one to show
        return None
    if cfg.get("output_type", generative.GENERATE) == generative.GENERATE and "doc_to_target" not in cfg:
        return (
            f"{path}: a {generative.GENERATE} task without doc_to_target: the design scores each answer "
            "against the gold one, so name it (doc_to_target: '{{answer}}', say)"
        )
    files = (cfg.get("dataset_kwargs") or {}).get("data_files")
    named_files = files.values() if isinstance(files, dict) else files if isinstance(files, list) else [files]
    for file in [f for f in named_files if isinstance(f, str)]:
        if Path(file).is_file() and Path(file).stat().st_size == 0:
            return f"{path}: its data file {file} is empty: it holds no documents; fill it or name another"
    return None


@dataclass(frozen=True)
class LmEvalSpec:
    """A multiple-choice lm-eval task seen as a task of the design."""

    task_name: str
    task: Any = field(repr=False, compare=False)  # lm-eval's ConfigurableTask
    include_path: tuple[str, ...] = ()  # where it was found

    def __reduce__(self):  # sent by name (its ConfigurableTask holds its dataset): found again where it lands
        return _load, (self.task_name, self.include_path)

    @property
    def slug(self) -> str:
        return folder_name(self.task_name)

    @property
    def target_delimiter(self) -> str:
        return self.task.config.target_delimiter

    @property
    def description(self) -> str:
        return self.task.config.description or ""

    def prompt(self, doc: dict) -> str:
        """The zero-shot context lm-eval scores the choices after (description, then doc_to_text)."""
        return self.task.fewshot_context(doc, num_fewshot=0)

    @property
    def generative(self) -> bool:
        """Whether the model generates its answer (generate_until) rather than choosing among choices."""
        return self.task.OUTPUT_TYPE == generative.GENERATE

    @property
    def answering(self) -> generative.Answering | None:
        """A generative task's generation and first filter, as lm-eval runs them; None otherwise."""
        if not self.generative:
            return None
        return generative.Answering.of(self.task.config.generation_kwargs, self.task.config.filter_list)

    def choices(self, doc: dict) -> list[str]:
        """The doc's choices; a generative task's gold answer, its one choice."""
        if self.generative:
            return [str(self.task.doc_to_target(doc))]
        if self.task.config.doc_to_choice is None:  # lm-eval's own error is a bare TypeError
            raise TaskError(
                f"task {self.task_name}: output_type multiple_choice and no doc_to_choice: add doc_to_choice "
                "(a list of the answers, or a template giving each document's)"
            )
        return [str(c) for c in self.task.doc_to_choice(doc)]

    def gold(self, doc: dict, choices: list[str]) -> int:
        if self.generative:
            return 0
        target = self.task.doc_to_target(doc)
        if isinstance(target, str) and not target.isdigit():
            if target not in choices:
                raise TaskError(f"task {self.task_name}: gold {target!r} is not one of its choices {choices}")
            return choices.index(target)
        if (
            isinstance(target, bool)
            or not isinstance(target, int | str)
            or not 0 <= int(target) < len(choices)
        ):
            raise TaskError(
                f"task {self.task_name}: doc_to_target gives {target!r} for a document; the design scores "
                f"one gold answer each: one of its choices {choices}, or its index from 0 to "
                f"{len(choices) - 1}. Fix doc_to_target"
            )
        return int(target)

    def frame(self, docs) -> pd.DataFrame:
        """One row per doc: `text` (doc_to_text), `prompt`, `choices`, `label` (gold index), `row`."""
        rows = []
        for i, doc in enumerate(docs):
            choices = self.choices(doc)
            rows.append(
                {
                    "text": str(self.task.doc_to_text(doc)),
                    "prompt": self.prompt(doc),
                    "choices": choices,
                    "label": self.gold(doc, choices),
                    "row": i,
                }
                | ({"answer": choices[0]} if self.generative else {})  # the gold answer (split_docs drops it)
            )
        return pd.DataFrame(rows)

    @property
    def classes(self) -> tuple[str, ...] | None:
        """The choices where every evaluation doc has the same (fixed classes), else None (a generative
        task's too)."""
        return None if self.generative else _fixed_classes(self)

    def pool(self) -> pd.DataFrame:
        return _pool(self)

    def pool_docs(self, sample: SampleSettings) -> pd.DataFrame:
        return self.pool()

    def pool_majority(self, sample: SampleSettings) -> float:
        pool = self.pool()
        return majority_share(pool["answer"] if self.generative else pool["label"])

    def training_pool(self) -> pd.DataFrame | None:
        """The training split's docs, where the task has one."""
        return _training_pool(self)

    # ---- the design's task protocol (harness.tasks.protocol.Spec) -----------------------------------------
    def draw_rows(self, sample: SampleSettings, subsample: int) -> Subsample:
        """extra and test from the evaluation docs; train (stratified where the classes are fixed) from
        the training split's, where the task has one."""
        pool = self.pool()
        labels = pool["label"].to_numpy() if self.classes is not None else None
        rows = draw_eval(labels, subsample, sample.n, sample.seed, size=len(pool))
        train = self.training_pool()
        if train is None:
            return rows
        if sample.m > len(train):
            raise TaskError(
                f"task {self.task_name}: m = {sample.m} exceeds its {len(train)} training docs; lower m"
            )
        rng = seeds.rng(sample.seed, subsample, "eval_train")
        per_class = np.bincount(train["label"], minlength=len(self.classes or ()))
        if self.classes is None or sample.m < len(per_class) or not per_class.all():
            picked = rng.choice(len(train), size=sample.m, replace=False)  # too few to stratify: uniform
        else:
            counts = train_counts(per_class, sample.m, sample.train_draw)
            picked = np.concatenate(
                [
                    rng.choice(np.flatnonzero(train["label"] == c), size=k, replace=False)
                    for c, k in enumerate(counts)
                ]
            )
        return Subsample(train=np.sort(picked), extra=rows.extra, test=rows.test, null=rows.null)

    def subsample_docs(self, sample: SampleSettings, subsample: int) -> dict[str, pd.DataFrame]:
        if sample.prompt_format != "plain":
            raise SettingsError.of("prompt_format", chat_problem(self.task_name))
        sub = self.draw_rows(sample, subsample)
        train = self.training_pool()
        pools = {
            "train": train if train is not None else self.pool().iloc[:0],
            "extra": self.pool(),
            "test": self.pool(),
            "null": self.pool(),
        }
        return {s: pools[s].iloc[sub.rows(s)].reset_index(drop=True) for s in DRAWS}

    def labeled_text(self, text: str, choice: str) -> str:
        return text + self.target_delimiter + choice

    def packed(self, docs: pd.DataFrame, answers: bool) -> str:
        if not answers:  # a split without answers may come without its label column
            return self.description + "\n\n".join(docs["text"])
        gold = [c[int(y)] for c, y in zip(docs["choices"], docs["label"])]
        return self.description + "\n\n".join(self.labeled_text(t, g) for t, g in zip(docs["text"], gold))

    def split_names(self) -> list[str]:
        return [role for role, key in SPLIT_KEYS.items() if getattr(self.task.config, key, None)]

    def split_docs(self, split: str, data_dir: str | None) -> pd.DataFrame:
        task = self.task
        docs = {"test": task.test_docs, "validation": task.validation_docs, "train": task.training_docs}
        return self.frame(docs[split]())

    def file_docs(self, raw: pd.DataFrame, path) -> pd.DataFrame:
        """A file's rows with the dataset's columns, through the task's process_docs and prompt."""
        import datasets

        task = self.task
        split = task.config.test_split or task.config.validation_split
        expected = list(task.dataset[split].column_names)
        missing = [c for c in expected if c not in raw.columns]
        if missing:
            raise UserError(
                f"{path}: missing column(s) {missing} of task {self.task_name}; its documents have the "
                f"columns {expected} (those of its {split!r} split); the file has {list(raw.columns)}"
            )
        docs = datasets.Dataset.from_pandas(raw[expected], preserve_index=False)
        if callable(task.config.process_docs):
            docs = task.config.process_docs(docs)
        try:
            return self.frame(docs)
        except Exception as err:  # the task's own prompt or target functions rejected a row
            raise UserError(
                f"{path}: task {self.task_name}'s prompt could not render a row ({type(err).__name__}: "
                f"{err}); check the file's values against the task's documents"
            ) from err

    def eval_tasks(self, metadata: dict[str, Any], include_path: Sequence[str], test: pd.DataFrame):
        """(lm-eval's tasks, samples, {doc_id: (pool row, gold)}): lm-eval scores exactly the `test` rows
        of the task's own evaluation docs (its doc_id is the eval-doc index: the pool row)."""
        by_row = {int(r): (int(r), int(y)) for r, y in zip(test["row"], test["label"])}
        return {self.task_name: self.task}, {self.task_name: list(by_row)}, by_row

    def lm_eval_args(self, split) -> list[str]:
        """lm_eval's flags that score a subsample's test split (`split`: a SplitSettings): its test rows as
        --samples (lm_eval finds the task by name, in the include folders)."""
        rows = [int(r) for r in self.subsample_docs(split, split.subsample)["test"]["row"]]
        argv = ["--tasks", self.task_name]
        for folder in split.include_path:
            argv += ["--include_path", str(Path(folder).resolve())]
        return [*argv, "--samples", json.dumps({self.task_name: rows})]


@cache
def _pool(spec: LmEvalSpec) -> pd.DataFrame:
    pool = spec.frame(spec.task.eval_docs)
    if not pool["text"].str.strip().any():
        raise TaskError(
            f"task {spec.task_name}: every evaluation doc's text (doc_to_text: "
            f"{spec.task.config.doc_to_text!r}) is empty, so TAPT has nothing to read; point doc_to_text "
            "at the column that holds the input"
        )
    return pool


@cache
def _training_pool(spec: LmEvalSpec) -> pd.DataFrame | None:
    return spec.frame(spec.task.training_docs()) if spec.task.has_training_docs() else None


@cache
def _fixed_classes(spec: LmEvalSpec) -> tuple[str, ...] | None:
    distinct = {tuple(c) for c in _pool(spec)["choices"]}
    return next(iter(distinct)) if len(distinct) == 1 else None


def load_lm_eval_spec(name: str, include_path: Sequence[str] = ()) -> LmEvalSpec | None:
    """The spec of lm-eval task `name` (loaded once per process), None where lm-eval has no such task;
    a task that is neither multiple choice nor generative with a per-document metric, or has no
    evaluation docs, is a TaskError."""
    return _load(name, tuple(map(str, include_path)))


@cache
def _load(name: str, include_path: tuple[str, ...]) -> LmEvalSpec | None:
    task = find_task(name, include_path)
    if task is None:
        return None
    if task.OUTPUT_TYPE not in ("multiple_choice", generative.GENERATE):
        raise TaskError(
            f"task {name!r} is output_type {task.OUTPUT_TYPE!r}: the design scores multiple-choice tasks "
            f"and {generative.GENERATE} tasks scored per document"
        )
    if task.OUTPUT_TYPE == generative.GENERATE:
        problem = generative.metric_problem(task.config.metric_list, name)
        if problem:
            raise TaskError(problem)
    if task.multiple_input:
        raise TaskError(f"task {name!r} scores several contexts per doc (multiple_input); not supported")
    if not (task.has_test_docs() or task.has_validation_docs()):
        raise TaskError(f"task {name!r} has no test_split or validation_split to draw test and extra from")
    task.set_config(key="num_fewshot", value=0)
    return LmEvalSpec(name, task, include_path)
