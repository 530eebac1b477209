"""The prompt layouts of PROMPTS.md; every stage (scoring, TAPT, contamination) uses these."""

from __future__ import annotations

from harness.spec import TaskSpec

MAX_TEXT_CHARS = 1000
PACK_SIZE = 8  # texts per packed training sequence


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


def packed(spec: TaskSpec, texts: list[str]) -> str:
    """One packing sequence: the instruction once, then each text as a block, blank-line separated."""
    return instruction(spec) + "\n\n".join(text_block(t) for t in texts)


def labeled(text: str, class_name: str) -> str:
    """A text-label pair as a labeled-data contaminator would hold it."""
    return f"{text_block(text)}\n ### Answer: {class_name}"
