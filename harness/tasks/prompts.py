"""The zero-shot prompt layout of the tapt_* tasks (the study's): an instruction naming the classes and the
question, the text, then "### Answer:"; every stage (scoring, TAPT, contamination) uses these."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from harness.core.plumbing.errors import SettingsError

if TYPE_CHECKING:  # the spec's own methods render through this module
    import pandas as pd

    from harness.tasks.spec import TaskSpec
    from harness.tasks.subsample import SampleSettings

MAX_TEXT_CHARS = 1000
PACK_SIZE = 8  # texts per packed training sequence
ANSWER_DELIMITER = (
    " "  # the task template's target_delimiter: lm-eval scores " <class name>" after the prompt
)
ANSWER = " ### Answer:"  # the assistant's open turn of a chat prompt (the study's RESPONSE_TEMPLATE)


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


@functools.lru_cache(maxsize=4)
def chat_tokenizer(model: str):
    """`model`'s tokenizer where it has a chat template; None where it has none (the study then joins the
    turns' texts, which is the plain prompt)."""
    from harness.core.engine import models

    tok = models.tokenizer(models.resolve(model))
    return tok if tok.chat_template else None


def chat(spec: TaskSpec, text: str, tokenizer) -> str:
    """The study's chat prompt (kddubey/pretrain-on-test _dum.py:94-135): the instruction as the system
    turn (before the text in the user turn where the template names no system role), the text block and a
    new line as the user turn, then the assistant turn ' ### Answer:' left open for the class name."""
    query = f"{text_block(text)}\n"
    if "'system'" in tokenizer.chat_template:
        turns = [{"role": "system", "content": instruction(spec)}, {"role": "user", "content": query}]
    else:
        turns = [{"role": "user", "content": instruction(spec) + query}]
    turns.append({"role": "assistant", "content": ANSWER})
    return tokenizer.apply_chat_template(turns, tokenize=False, continue_final_message=True)


def prompter(spec: TaskSpec, sample: SampleSettings | None):
    """The function that renders a text's prompt under `sample`'s prompt_format."""
    if sample is None or sample.prompt_format == "plain":
        return functools.partial(zero_shot, spec)
    if not sample.chat_model:
        problem = "is unset: prompt_format chat needs the model whose template it uses"
        raise SettingsError.of("chat_model", problem)
    tokenizer = chat_tokenizer(sample.chat_model)
    return functools.partial(zero_shot, spec) if tokenizer is None else (lambda t: chat(spec, t, tokenizer))


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


def asked(spec: TaskSpec, sample: SampleSettings | None):
    """The function that renders a generative task's question under `sample`'s prompt_format: plain, or
    the chat model's template with the question as the user turn and the assistant's turn opened."""
    from harness.tasks.generative import question

    plain = functools.partial(question, spec.instruction)
    if sample is None or sample.prompt_format == "plain":
        return plain
    if not sample.chat_model:
        raise SettingsError.of(
            "chat_model", "is unset: prompt_format chat needs the model whose template it uses"
        )
    tokenizer = chat_tokenizer(sample.chat_model)
    if tokenizer is None:
        return plain
    return lambda t: tokenizer.apply_chat_template(
        [{"role": "user", "content": plain(t)}], tokenize=False, add_generation_prompt=True
    )


def rendered(spec: TaskSpec, docs: pd.DataFrame, sample: SampleSettings | None = None) -> pd.DataFrame:
    """A tapt_* task's `text`/`label` rows with their zero-shot prompt (by `sample`'s prompt_format; plain
    without one) and the task's classes; a generative task's with its question and its gold answer as the
    one choice (label 0)."""
    if spec.generative:
        prompt = asked(spec, sample)
        return docs.assign(prompt=[prompt(t) for t in docs["text"]], choices=[[a] for a in docs["answer"]])
    prompt = prompter(spec, sample)
    return docs.assign(prompt=[prompt(t) for t in docs["text"]], choices=[list(spec.classes)] * len(docs))


def packed_answers(spec: TaskSpec, questions: list[str], answers: list[str] | None) -> str:
    """A generative task's packing sequence: its instruction once, then each question (with its gold
    answer where given), blank-line separated."""
    blocks = (
        f"Question: {q}" + (f"\nAnswer: {a}" if a is not None else "")
        for q, a in zip(questions, answers or [None] * len(questions))
    )
    return (f"{spec.instruction}\n\n" if spec.instruction else "") + "\n\n".join(blocks)
