"""Whether the planted leak's class name survives the cut to a sequence's tokens: for every document of
each task's pool, the leak's text (the text, a new line, its class name) tokenized as masked-LM TAPT
reads it, at --max-length tokens. `cut whole` is the rule before 2026-12-06 (the joined text cut at the
end, so a long text loses its class name); `kept` is the rule now (the text cut, never the class name).
Prints, per task, the share of documents whose class name ends the sequence under each rule.

    python benchmarks/leak_labels.py --data-dir ../shared/data [--base all-MiniLM-L6-v2] [--max-length 256]
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.core.plumbing.settings import Settings, option, parse_script  # noqa: E402


@dataclass(kw_only=True)
class LeakArgs(Settings):
    SMOKE = {"tasks": ["ag_news"]}

    data_dir: str = option(help="folder of <slug>/data.parquet|csv|jsonl (the offline samples)")
    base: str = option("all-MiniLM-L6-v2", "whose tokenizer cuts the sequences")
    max_length: int = option(256, "tokens a sequence (the study's 256)")
    tasks: list[str] = option([], "task slugs (default: every task with data in --data-dir)")


def ends_with(ids: list[int], label: list[int], tail: list[int]) -> bool:
    """Whether `ids` end with the label's tokens, before the tokenizer's closing special tokens."""
    body = ids[: len(ids) - len(tail)] if tail else ids
    return body[-len(label) :] == label


def survival(tokenizer, texts: list[str], names: list[str], max_length: int) -> tuple[float, float]:
    """The share of documents whose class name ends its sequence: cut whole, and kept."""
    from tapt.corpus import keeping_answers

    full, content = tokenizer("x")["input_ids"], tokenizer("x", add_special_tokens=False)["input_ids"]
    tail = full[full.index(content[0]) + len(content) :]  # the closing special tokens ([SEP]; none for BPE)
    whole = tokenizer([f"{t}\n{c}" for t, c in zip(texts, names)], truncation=True, max_length=max_length)
    kept = keeping_answers(tokenizer, [(t, f"\n{c}") for t, c in zip(texts, names)], max_length)
    labels = [tokenizer(f"\n{c}", add_special_tokens=False)["input_ids"] for c in names]
    before = sum(ends_with(ids, lab, tail) for ids, lab in zip(whole["input_ids"], labels))
    after = sum(ends_with(ids, lab, tail) and len(ids) <= max_length for ids, lab in zip(kept, labels))
    return before / len(texts), after / len(texts)


def main(a: LeakArgs) -> None:
    import transformers

    from harness.core.engine import models
    from harness.tasks.data import load_pool
    from harness.tasks.spec import all_slugs, load_spec

    transformers.logging.set_verbosity_error()  # a text longer than the model's maximum is the point here
    tokenizer = models.tokenizer(models.resolve(a.base))
    slugs = a.tasks or [s for s in all_slugs() if (Path(a.data_dir) / s).is_dir()]
    print(f"{'task':34} {'documents':>9} {'cut whole':>10} {'kept':>7}")
    for slug in slugs:
        spec = load_spec(slug)
        pool = load_pool(spec, a.data_dir)
        names = [spec.classes[int(y)] for y in pool["label"]]
        before, after = survival(tokenizer, list(pool["text"]), names, a.max_length)
        print(f"{slug:34} {len(pool):>9} {before:>10.1%} {after:>7.1%}")


if __name__ == "__main__":
    main(parse_script(LeakArgs, __doc__))
