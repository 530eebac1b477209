"""CoDeC (Zawalski et al. 2025, "Detecting Data Contamination in LLMs via In-Context Learning"): how a
document's likelihood changes when other documents of the same set are put in front of it.

Per document, the mean log-probability of its scored tokens alone, and again with `k` other documents
of its set before it; CoDeC's delta is the second minus the first. On a set the model has not seen, the
others teach it the set's style and the document gains (delta > 0); on a set it has memorised, they
add nothing it does not know and disturb what it recalls, and the document loses (delta < 0). The
dataset's score is the share of its documents that lose: the paper reads a high share as
contamination and a low one as an unseen set, with no reference set needed.

As the authors' demo scores it (its `token_range=(10, -1)`, `num_context_examples=1`, contexts joined
by a blank line): the first 10 tokens of a document and its last are not scored, and k is 1 by default
(the authors found 1 sufficient). Differences, each for a reason:
- a document here is a zero-shot prompt: the instruction every prompt shares and the answer template
  every prompt ends with are not its own, so the span counts from its own text (the tokens between
  them); a context document teaches those parts, and scoring them would read that lesson;
- a document whose own text is shorter than 12 tokens is scored on what the cut leaves, at least one
  token (the authors drop it; a split of short questions would have nothing left);
- the k context documents are drawn per document by a generator seeded with (seed, row), from its own
  set, never the document itself; where the whole would exceed the model's positions, the context is cut
  from the left.
Stored as the drop (minus delta), so that higher reads as member-like, as every other exposure score does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.core import loglik
from harness.core.recipe import recipe_table

SEPARATOR = "\n\n"  # between the context documents and before the scored one
SKIP_FIRST = 10  # the authors' token_range (10, -1): a document's first 10 tokens are not scored ...
DROP_LAST = 1  # ... nor its last one


def shared_suffix(sequences: Sequence[Sequence[int]]) -> int:
    """Tokens at the end of every sequence that are the same in all (kept below the shortest)."""
    return loglik.shared_prefix([list(reversed(s)) for s in sequences])


def span(start: int, end: int) -> tuple[int, int]:
    """The scored tokens [a, b) of a document whose own tokens are [start, end), as the authors cut them."""
    a = min(start + SKIP_FIRST, max(end - DROP_LAST - 1, start))
    return a, max(end - DROP_LAST, a + 1)


def context_rows(groups: Sequence, rows: Sequence[int], k: int, seed: int) -> list[list[int]]:
    """For each document (by position), the positions of the k documents of its group put before it."""
    groups, out = np.asarray(groups), []
    for i, row in enumerate(rows):
        others = np.flatnonzero((groups == groups[i]) & (np.arange(len(groups)) != i))
        rng = np.random.default_rng([seed, int(row)])
        out.append([int(j) for j in rng.permutation(others)[:k]])
    return out


def drops(
    model,
    tokenizer,
    contexts: list[list[int]],
    alone: list[np.ndarray],
    groups: Sequence,
    rows: Sequence[int],
    k: int,
    seed: int,
    batch_size: int = 8,
) -> np.ndarray:
    """Per document: the mean log-probability of its scored span alone (`alone`: each document's token
    log-probabilities from the exposure pass, index t - 1 for token t) minus the same tokens' mean with k
    documents of its group before it."""
    limit = getattr(model.config, "max_position_embeddings", None) or 1 << 30
    sep = tokenizer(SEPARATOR, add_special_tokens=False)["input_ids"]
    bos = getattr(tokenizer, "bos_token_id", None)
    prefix_len, suffix_len = loglik.shared_prefix(contexts), shared_suffix(contexts)

    def body(ids: list[int]) -> tuple[list[int], int]:  # a document without the BOS a tokenizer adds
        cut = int(bos is not None and len(ids) > 1 and ids[0] == bos)
        return ids[cut:], cut

    sequences, offsets, spans = [], [], []
    for i, chosen in enumerate(context_rows(groups, rows, k, seed)):
        prefix = contexts[chosen[0]] + sep if chosen else []
        for j in chosen[1:]:
            prefix += body(contexts[j])[0] + sep
        target, cut = body(contexts[i])
        room = max(limit - len(target), 1)
        prefix = prefix[-room:] if len(prefix) > room else prefix
        sequences.append(prefix + target)
        offsets.append(len(prefix) - cut)  # token t of the document alone is token offset + t here
        own_end = max(len(contexts[i]) - suffix_len, prefix_len + 1)
        spans.append(span(max(prefix_len, 1), own_end))
    scored = loglik.score(model, sequences, None, batch_size)
    out = []
    for s, o, (a, b), lone in zip(scored, offsets, spans, alone):
        out.append(np.mean(lone[a - 1 : b - 1]) - np.mean(s.token_logprobs[o + a - 1 : o + b - 1]))
    return np.array(out)


def share(dropped: np.ndarray) -> float:
    """CoDeC's dataset score: the share of documents whose likelihood fell with the context."""
    dropped = np.asarray(dropped, float)
    return float((dropped > 0).mean()) if len(dropped) else float("nan")


RECIPE = recipe_table(  # the authors' demo notebook (NVIDIA-NeMo/Evaluator, contamination_detection_demo)
    [
        ("score", "mean log p of the target alone minus with context", "the same, stored as the drop", ""),
        ("flag", "a document whose likelihood fell", "the same (the share of a set)", ""),
        ("k", "1 context document", "1 by default (codec_context)", ""),
        (
            "context",
            "random others of the set, joined by a blank line",
            "the same, seeded by (seed, row)",
            "",
        ),
        (
            "span",
            "tokens 10 to the last but one of the text",
            "the same, from the document's own text",
            "a prompt's shared instruction and template are not its own",
        ),
        (
            "short text",
            "under 12 tokens: dropped",
            "scored on at least one token",
            "a split of short questions would be empty",
        ),
        ("test", "the share, read on its own", "test's drops against extra's", "a grid has a reference"),
        ("long input", "text cut at 2048 characters", "context cut from the left", "the model's positions"),
    ]
)
