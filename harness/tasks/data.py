"""Load a task's pool of labeled texts from a local data directory or the Hugging Face hub."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from harness.core.plumbing.errors import TaskError, named

if TYPE_CHECKING:  # the spec's own methods load its pool through this module
    from harness.tasks.spec import TaskSpec

DATA_DIR_ENV = "TAPT_BENCH_DATA_DIR"
LOCAL_FILES = ("data.parquet", "data.csv", "data.jsonl")


def local_file(spec: TaskSpec, data_dir: str | Path) -> Path:
    """The task's file under `data_dir`, or a TaskError that says how to provide one."""
    folder = Path(data_dir).expanduser() / spec.slug
    found = [folder / name for name in LOCAL_FILES if (folder / name).is_file()]
    if len(found) > 1:
        raise TaskError(
            f"task {spec.task_name}: {folder} holds {' and '.join(p.name for p in found)}; keep one file of "
            "the task's data there (which one is read should not depend on an order)"
        )
    if found:
        return found[0]
    raise TaskError(
        f"task {spec.task_name}: its data is not available offline: no {' / '.join(LOCAL_FILES)} "
        f"in {folder}. Provide {folder}/data.parquet (or .csv/.jsonl) with the YAML's text_field and "
        + (
            f"{spec.answer_field} columns (a question and its gold answer)"
            if spec.generative
            else f"label_field columns, or `text` and `label` (0..{len(spec.classes) - 1} in the order "
            f"{list(spec.classes)}, or the class names)"
        )
        + f", or run with network access and no data_dir to load {spec.hub_id!r} from the Hugging Face hub."
    )


def read_local(path: Path) -> pd.DataFrame:
    """A task's local data file; a file that cannot be read is named with its line and the fix."""
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        if path.suffix == ".csv":
            return pd.read_csv(path, encoding="utf-8")
        return read_jsonl(path)
    except UnicodeDecodeError:
        data = path.read_bytes()
        try:  # the reader's offset is within its chunk: find the first bad byte in the whole file
            data.decode("utf-8")
        except UnicodeDecodeError as whole:
            err = whole
        line = data[: err.start].count(b"\n") + 1
        raise TaskError(
            f"{path}: line {line} is not UTF-8 (byte {err.object[err.start]:#x}): save the file as UTF-8"
        ) from None
    except pd.errors.EmptyDataError:
        raise TaskError(f"{path}: is empty: write a header row (text,label) and one row a document") from None
    except TaskError:
        raise
    except Exception as err:  # any other reader error means the file is unusable
        raise TaskError(f"{path}: cannot be read ({named(err)})") from err


def read_jsonl(path: Path) -> pd.DataFrame:
    """One JSON object a line (blank lines skipped); a line that is not one is named."""
    import json

    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise TaskError(
                f"{path}: line {i}, column {err.colno}: not JSON ({err.msg}): fix that line"
            ) from None
        if not isinstance(row, dict):
            raise TaskError(f'{path}: line {i} is {type(row).__name__}, not an object: write {{"text": ...}}')
        rows.append(row)
    if not rows:
        raise TaskError(f"{path}: is empty: write one JSON object a line, with text and label")
    return pd.DataFrame(rows)


def read_hub(spec: TaskSpec) -> pd.DataFrame:
    """The task's split from the hub, as the hub's columns."""
    import datasets

    try:
        return datasets.load_dataset(spec.hub_id, spec.hub_config, split=spec.hub_split).to_pandas()
    except Exception as err:  # offline, missing or renamed dataset: all end here
        raise TaskError(
            f"task {spec.task_name}: cannot load {spec.hub_id!r} from the Hugging Face hub "
            f"({named(err)}). Offline, name a data directory holding {spec.slug}/data.parquet "
            f"(columns `text`, `label`): --data-dir DIR (tapt-bench), the config key data_dir, "
            f'--metadata \'{{"data_dir": "DIR"}}\' (lm_eval), or ${DATA_DIR_ENV}.'
        ) from err


def to_canonical(spec: TaskSpec, raw: pd.DataFrame, source: str) -> pd.DataFrame:
    """`text` and `label` columns from the YAML's text_field(s), label_field and label_map (hub or
    local data alike); data already in canonical `text`/`label` form pass through."""
    fields = [spec.text_field] if isinstance(spec.text_field, str) else list(spec.text_field)
    if all(f in raw.columns for f in [*fields, spec.label_field]):
        text = (
            raw[fields].fillna("").astype(str).agg("\n".join, axis=1) if len(fields) > 1 else raw[fields[0]]
        )
        label = raw[spec.label_field]
    elif {"text", "label"} <= set(raw.columns):
        text, label = raw["text"], raw["label"]
    else:
        return raw  # pool_problems names the missing columns
    return pd.DataFrame({"text": text, "label": canonical_labels(spec, label, source)})


def canonical_labels(spec: TaskSpec, label: pd.Series, source: str) -> pd.Series:
    """Class indices 0..K-1: kept if already so, else through label_map, else class names to indices."""
    k = len(spec.classes)
    empty = label.isna().to_numpy()
    if empty.any():
        raise TaskError(
            f"task {spec.task_name} ({source}): row {int(empty.argmax())} has an empty label "
            f"({int(empty.sum())} row(s) like it): fill or drop them"
        )
    numbers = pd.to_numeric(label, errors="coerce")
    if label.dtype != bool and numbers.notna().all() and numbers.isin(range(k)).all():
        return label
    if spec.label_map is not None:
        table = {**{str(key): v for key, v in spec.label_map.items()}, **spec.label_map}
    elif label.map(lambda v: isinstance(v, str)).all():
        table = {name: i for i, name in enumerate(spec.classes)}
    else:
        return label  # pool_problems names the bad labels
    mapped = label.map(lambda v: table.get(v, table.get(str(v))))
    unknown = label[mapped.isna()]
    if len(unknown):
        known = list(spec.label_map) if spec.label_map is not None else list(spec.classes)
        raise TaskError(
            f"task {spec.task_name} ({source}): label {unknown.iloc[0]!r} is not one of {known} "
            f"({len(unknown)} row(s)); fix the data or the YAML's label_map/classes"
        )
    return mapped.astype("int64")


def apply_filters(spec: TaskSpec, df: pd.DataFrame) -> pd.DataFrame:
    """The task's filters from its YAML: drop missing/empty texts, keep texts under max_chars."""
    if spec.drop_empty:
        df = df[df["text"].notna() & (df["text"].astype(str).str.strip() != "")]
    if spec.max_chars is not None:
        df = df[df["text"].astype(str).str.len() < spec.max_chars]
    return df.reset_index(drop=True)


def pool_problems(spec: TaskSpec, df: pd.DataFrame) -> list[str]:
    """Every violation of a pool's invariants: columns, empty texts, labels 0..K-1 all present."""
    missing = [c for c in ("text", "label") if c not in df.columns]
    if missing:
        fields = [spec.text_field] if isinstance(spec.text_field, str) else list(spec.text_field)
        return [
            f"missing column(s) {missing}; columns are {list(df.columns)}; name them in the YAML's "
            f"text_field/label_field (now {fields}/{spec.label_field!r}) or rename them to text/label"
        ]
    if df.empty:
        return [
            "no rows: the data has a header but no labeled rows (or the task's filters "
            "drop_empty/max_chars removed every row); add rows with a `text` and a `label`"
        ]
    problems = []
    if pd.api.types.is_numeric_dtype(df["text"]):
        problems.append(
            f"column `text` holds numbers (dtype {df['text'].dtype}, first {df['text'].iloc[0]}), not texts; "
            "is it the right column? The prompt would read '### Text: <number>'"
        )
    empty = df["text"].isna() | (df["text"].astype(str).str.strip() == "")
    if empty.any():
        problems.append(
            f"{int(empty.sum())} missing or empty text(s), first at row {int(empty.to_numpy().argmax())}; "
            "drop them or set `drop_empty: true` in dataset_kwargs"
        )
    labels = pd.to_numeric(df["label"], errors="coerce")
    bad = labels.isna() | (labels != labels.round())
    if bad.any():
        row = int(bad.to_numpy().argmax())
        value = df["label"].iloc[row]
        shown = (
            "an empty label" if pd.isna(value) else repr(value.item() if hasattr(value, "item") else value)
        )
        return problems + [
            f"labels must be integers 0..K-1 or class names; row {row} has {shown} "
            f"({int(bad.sum())} row(s) like it): fix or drop them"
        ]
    k, present = len(spec.classes), sorted(int(v) for v in labels.unique())
    if len(present) != k:
        problems.append(
            f"class-count mismatch: the data has {len(present)} distinct labels {present}, "
            f"the YAML names {k} classes {list(spec.classes)}"
        )
    gaps = [c for c in range(k) if c not in present]
    outside = [v for v in present if not 0 <= v < k]
    if gaps or outside:
        said = [f"labels {outside} are not classes (0..{k - 1})"] if outside else []
        said += (
            [f"classes {gaps} have no row" if outside else f"classes {gaps} have no row (label gap)"]
            if gaps
            else []
        )
        problems.append(
            f"labels must be 0..{k - 1}, one for each of the YAML's {k} classes {list(spec.classes)}: "
            + "; ".join(said)
        )
    return problems


def validate_pool(spec: TaskSpec, df: pd.DataFrame, source: str) -> pd.DataFrame:
    """The pool with `text` str and `label` int64, or a TaskError listing every problem."""
    problems = pool_problems(spec, df)
    if problems:
        raise TaskError(f"task {spec.task_name} ({source}):\n  - " + "\n  - ".join(problems))
    return pd.DataFrame({"text": df["text"].astype(str), "label": df["label"].astype("int64")})


def resolve_data_dir(data_dir: str | Path | None) -> Path | None:
    data_dir = data_dir or os.environ.get(DATA_DIR_ENV)
    return Path(data_dir) if data_dir else None


def load_pool(spec: TaskSpec, data_dir: str | Path | None = None) -> pd.DataFrame:
    """The task's validated pool (`text`, `label`; a generative task's also `answer`, its label 0), in
    source order, from its generator, `data_dir` or the hub."""
    if spec.generative:
        return generative_pool(spec, data_dir)
    root = resolve_data_dir(data_dir)
    if root is not None:
        path = local_file(spec, root)
        df, source = read_local(path), str(path)
    else:
        df, source = read_hub(spec), f"hub {spec.hub_id}"
    df = to_canonical(spec, df, source)
    if "text" in df.columns:
        df = apply_filters(spec, df)
    return validate_pool(spec, df, source)


def generative_pool(spec: TaskSpec, data_dir: str | Path | None) -> pd.DataFrame:
    """A generative task's pool: its generator's problems, or its file's (or the hub's) text and answer
    columns; every row has a question and a gold answer."""
    from harness.tasks.generative import generated

    if spec.generator:
        df, source = generated(spec.generator, spec.task_name), f"generator {spec.generator}"
    else:
        root = resolve_data_dir(data_dir)
        path = local_file(spec, root) if root is not None else None
        df, source = (read_local(path), str(path)) if path else (read_hub(spec), f"hub {spec.hub_id}")
    fields = [spec.text_field] if isinstance(spec.text_field, str) else list(spec.text_field)
    missing = [c for c in [*fields, spec.answer_field] if c not in df.columns]
    if missing:
        raise TaskError(
            f"task {spec.task_name} ({source}): missing column(s) {missing}; columns are {list(df.columns)}; "
            "name them in the YAML's text_field/answer_field"
        )
    text = df[fields].fillna("").astype(str).agg("\n".join, axis=1) if len(fields) > 1 else df[fields[0]]
    df = apply_filters(spec, pd.DataFrame({"text": text, "answer": df[spec.answer_field]}))
    empty = df["text"].astype(str).str.strip().eq("") | df["answer"].isna()
    if empty.any():
        raise TaskError(
            f"task {spec.task_name} ({source}): {int(empty.sum())} row(s) with an empty question or no gold "
            f"answer, first at row {int(empty.to_numpy().argmax())}: drop them or set `drop_empty: true`"
        )
    return pd.DataFrame({"text": df["text"].astype(str), "label": 0, "answer": df["answer"].astype(str)})
