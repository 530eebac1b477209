"""Generative tasks: lm-eval `generate_until` tasks whose metric is computed per document from the
generated answer (exact_match after the task's filters, as gsm8k, minerva_math and the AIME tasks
define it), read by the design like any task. A document's gold answer is its one "choice" (label 0),
so the leak (a prompt followed by its gold answer) and prompt TAPT read them as they read a class.

Here: the built-in pools a generative tapt_* task may draw from (`generator`), the prompt of a question,
and the check that a task's metric is one a document can be scored by."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from harness.core.plumbing.errors import TaskError, named

GENERATE = "generate_until"
# lm-eval metrics whose value is a property of one document's answer (then averaged): a unit's
# effects read them per document. Corpus metrics (bleu, chrf, ter) are computed over all documents.
PER_DOCUMENT = ("exact_match", "acc", "acc_norm")
CORPUS = ("bleu", "chrf", "ter")


def addition() -> pd.DataFrame:
    """Every sum a + b with a and b from 1 to 49, asked as 'What is a plus b?' (2,401 problems, in order
    of a then b): offline, the same on every machine, and answered above 0 by a 135M model."""
    pairs = [(a, b) for a in range(1, 50) for b in range(1, 50)]
    return pd.DataFrame(
        {"text": [f"What is {a} plus {b}?" for a, b in pairs], "answer": [str(a + b) for a, b in pairs]}
    )


GENERATORS = {"addition": addition}


def generated(name: str, task: str) -> pd.DataFrame:
    if name not in GENERATORS:
        raise TaskError(f"task {task}: unknown generator {name!r}; the built-in ones: {sorted(GENERATORS)}")
    return GENERATORS[name]()


def question(instruction: str, text: str) -> str:
    """A generative task's zero-shot prompt: its instruction (where it has one), the question, then
    'Answer:' left open for the model."""
    head = f"{instruction}\n\n" if instruction else ""
    return f"{head}Question: {text}\nAnswer:"


def metric_problem(metric_list: Any, task: str) -> str | None:
    """Why a generative task's metrics cannot be read per document (None where they can): a corpus
    metric, a mean over documents of a metric lm-eval does not compute per document, or an empty list
    (no metric_list at all is lm-eval's default for the output type: exact_match)."""
    if metric_list is None:  # lm-eval scores a generate_until task by exact_match where it names none
        return None
    names = [m.get("metric") if isinstance(m, dict) else m for m in metric_list]
    if not names:
        return f"task {task} names no metric (metric_list): the design needs one correctness a document"
    corpus = [n for n in names if n in CORPUS]
    if corpus:
        return (
            f"task {task}'s metric {corpus[0]} is computed over the whole corpus, not per document, and the "
            "design reads each document's correctness (exact_match, acc): it cannot pair the conditions' "
            "documents"
        )
    for m in metric_list:
        if isinstance(m, dict) and m.get("aggregation") not in (None, "mean"):
            return (
                f"task {task}'s metric {m.get('metric')} aggregates by {m['aggregation']!r}, not a mean of "
                "per-document values: the design reads each document's correctness"
            )
    if names[0] not in PER_DOCUMENT:
        return (
            f"task {task}'s first metric {names[0]!r} is not one the design reads as a document's "
            f"correctness ({', '.join(PER_DOCUMENT)}): put one of those first in metric_list"
        )
    return None


NO_MATCH = "[invalid]"  # lm-eval's regex filter's answer where nothing matches: no answer


@dataclass(frozen=True)
class Answering:
    """How a generative task's answer is generated and read, as lm-eval scores it: its generation's stop
    strings and token budget, and its first filter (the components lm-eval chains)."""

    until: tuple[str, ...]
    max_tokens: int
    filters: tuple  # ((filter name, its keyword arguments), ...)

    @classmethod
    def of(cls, generation_kwargs: dict | None, filter_list: list | None) -> Answering:
        kwargs = dict(generation_kwargs or {})
        until = kwargs.get("until") or []
        until = (until,) if isinstance(until, str) else tuple(until)
        first = (filter_list or [{}])[0].get("filter") or []
        components = tuple(
            (f["function"], tuple(sorted((k, v) for k, v in f.items() if k != "function"))) for f in first
        )
        return cls(until, int(kwargs.get("max_gen_toks", 256)), components)

    def cut(self, text: str) -> str:
        """The text up to its first stop string, as lm-eval's generation stops there."""
        ends = [text.find(u) for u in self.until if u and u in text]
        return text[: min(ends)] if ends else text

    def extract(self, texts: list[str]) -> list[str | None]:
        """Each text's answer through the task's first filter (None where it finds none)."""
        from lm_eval.filters import build_filter_ensemble

        ensemble = build_filter_ensemble("answer", [(name, dict(kw)) for name, kw in self.filters])
        resps = [[self.cut(t)] for t in texts]
        for f in ensemble.filters:
            resps = f().apply(resps, [{} for _ in texts])
        out = []
        for r in resps:
            value = r if isinstance(r, str) else (r[0] if r else None)
            out.append(None if value is None or str(value).strip() in ("", NO_MATCH) else str(value).strip())
        return out


NUMBER = re.compile(r"-?\d*\.?\d+")  # the authors' last-number pattern, read with the commas dropped
# the phrases the authors read an answer after, in their order (qwen_math_parser.py `extract_answer`, after
# \boxed{}); the minerva form ("final answer is $...$. I hope") comes first there
PHRASES = ("he answer is", "final answer is")


def boxed(text: str) -> str:
    """What follows the text's last 'boxed': the braces' content (nested braces kept), else up to a '$'."""
    tail = text.split("boxed")[-1]
    if not tail.startswith("{"):
        return tail.split("$")[0].strip()
    depth, out = 1, []
    for ch in tail[1:]:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth == 0:
            break
        out.append(ch)
    return "".join(out)


def math_answer(text: str) -> str | None:
    """TTRL's math rule, in its order (PRIME-RL/TTRL qwen_math_parser.py `extract_answer`): the minerva
    form 'final answer is $X$. I hope'; else the last \\boxed{}; else what follows the last 'he answer
    is'; else the last 'final answer is'; else the last number (commas dropped). Then its clean-up: new
    lines and the spaces after them removed, a leading ':' and a trailing '.' or '/' dropped. None where
    nothing is left. Not reproduced: the parser's LaTeX and unit normalisation (strip_string)."""
    if "final answer is $" in text and "$. I hope" in text:
        found = text.split("final answer is $", 1)[1].split("$. I hope", 1)[0].strip()
    elif "boxed" in text:
        found = boxed(text)
    elif any(p in text for p in PHRASES):
        phrase = next(p for p in PHRASES if p in text)
        found = text.split(phrase)[-1].strip()
    else:
        numbers = NUMBER.findall(text.replace(",", ""))
        found = numbers[-1] if numbers else ""
    found = re.sub(r"\n\s*", "", found).strip()
    found = found.removeprefix(":").strip()
    found = found.removesuffix(".").removesuffix("/").strip()
    return found or None


def equivalent(answer: str | None, gold: str | None) -> bool:
    """Whether an answer is the gold one: equal as numbers where both read as one (36, 36.0 and 36.00
    agree; commas dropped), else equal as text (spaces at the ends ignored). The authors' reward checks
    mathematical equivalence (auto_verify, with sympy); this is its numeric part."""
    if answer is None or gold is None:
        return False
    a, g = str(answer).strip(), str(gold).strip()
    try:
        return float(a.replace(",", "")) == float(g.replace(",", ""))
    except ValueError:
        return a == g


def answering_problems(how: Answering, gold: list[str], task: str) -> list[str]:
    """What keeps a generative task's answers from being read as a run reads them (empty where nothing
    does): a token budget under 1, a filter's regex that is not one, a filter that fails on an answer,
    or one that reads none of the gold answers back from a model that wrote exactly them."""
    out = []
    if how.max_tokens < 1:
        out.append(
            f"task {task}: generation_kwargs max_gen_toks is {how.max_tokens}, so the model writes nothing; "
            "set it to 1 or more"
        )
    for name, kwargs in how.filters:
        pattern = dict(kwargs).get("regex_pattern")
        if name == "regex" and pattern is not None:
            try:
                re.compile(pattern)
            except re.error as err:
                out.append(
                    f"task {task}: filter regex_pattern {pattern!r} is not a regular expression ({err})"
                )
    if out or not gold:
        return out
    try:
        read = how.extract(list(gold))
    except Exception as err:  # lm-eval's filters raise what they raise: each is a finding
        return [f"task {task}: its first filter fails on the gold answers ({named(err)}); fix filter_list"]
    if not any(equivalent(r, g) for r, g in zip(read, gold)):
        shown = ", ".join(f"{g!r} -> {r!r}" for g, r in list(zip(gold, read))[:3])
        out.append(
            f"task {task}: its first filter reads none of {len(gold)} gold answers back from a model that "
            f"wrote exactly them ({shown}): every answer would be scored wrong; fix filter_list"
        )
    return out
