"""The zero-shot prompt layout of the tapt_* tasks (the study's): an instruction naming the classes and the
question, the text, then "### Answer:"; every stage (scoring, TAPT, contamination) uses these."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the spec's own methods render through this module
    import pandas as pd

    from harness.tasks.spec import TaskSpec

MAX_TEXT_CHARS = 1000
PACK_SIZE = 8  # texts per packed training sequence
ANSWER_DELIMITER = (
    " "  # the task template's target_delimiter: lm-eval scores " <class name>" after the prompt
)


def instruction(spec: TaskSpec) -> str:
    """The instruction block: class names one per line, then the task's question."""
    classes = "\n".join(spec.classes)
    return (
        "Your task is to classify a given text as one of these categories:\n"
        f"{classes}\n\n{spec.instruction}\n\n"
    )


def text_block(text: str) -> str:
    return f"### Text: {text[:MAX_TEXT_CHARS]}"


def zero_shot(spec: TaskSpec, text: str) -> str:
    """The zero-shot prompt without an answer; the answer is scored as ' <class name>'."""
    return f"{instruction(spec)}{text_block(text)}\n ### Answer:"


def packed(spec: TaskSpec, texts: list[str], labels: list[int] | None = None) -> str:
    """One packing sequence: the instruction once, then each text as a block (with its answer when
    labels are given), blank-line separated."""
    blocks = (
        text_block(t) if labels is None else labeled(t, spec.classes[y])
        for t, y in zip(texts, labels or [None] * len(texts))
    )
    return instruction(spec) + "\n\n".join(blocks)


def labeled(text: str, class_name: str) -> str:
    """A text-label pair as a labeled-data contaminator would hold it."""
    return f"{text_block(text)}\n ### Answer: {class_name}"


def rendered(spec: TaskSpec, docs: pd.DataFrame) -> pd.DataFrame:
    """A tapt_* task's `text`/`label` rows with their zero-shot prompt and the task's classes."""
    return docs.assign(
        prompt=[zero_shot(spec, t) for t in docs["text"]], choices=[list(spec.classes)] * len(docs)
    )
