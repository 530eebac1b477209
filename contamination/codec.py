"""CoDeC (Zawalski et al. 2025, "Detecting Data Contamination in LLMs via In-Context Learning"): how a
document's likelihood changes when other documents of the same set are put in front of it.

Per document, the mean log-probability of its own tokens alone, and again with `k` other documents of
its set before it; CoDeC's delta is the second minus the first. On a set the model has not seen, the
others teach it the set's style and the document gains (delta > 0); on a set it has memorised, they
add nothing it does not know and disturb what it recalls, and the document loses (delta < 0). The
dataset's score is the share of its documents that lose: the paper reads a high share as
contamination and a low one as an unseen set, with no reference set needed.

Choices the paper leaves open, made here: the scored tokens are the document's own (after the prefix
every document shares, as the exposure test's `text` score); the `k` context documents are drawn per
document by a generator seeded with (seed, row), from its own set (a subsample's test documents for a
test document, extra's for an extra one), never the document itself, each followed by a blank line;
where the whole would exceed the model's positions, the context is cut from the left. Stored as the
drop (minus delta), so that higher reads as member-like, as every other exposure score does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.core import loglik

SEPARATOR = "\n\n"  # between the context documents and before the scored one


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
    start: int,
    groups: Sequence,
    rows: Sequence[int],
    alone: np.ndarray,
    k: int,
    seed: int,
    batch_size: int = 8,
) -> np.ndarray:
    """Per document: its mean log-probability over tokens `start + 1 ..` alone (`alone`, from the
    exposure pass) minus the same tokens' mean with k documents of its group before it."""
    limit = getattr(model.config, "max_position_embeddings", None) or 1 << 30
    sep = tokenizer(SEPARATOR, add_special_tokens=False)["input_ids"]
    bos = getattr(tokenizer, "bos_token_id", None)

    def body(ids: list[int]) -> tuple[list[int], int]:  # a document without the BOS a tokenizer adds
        cut = int(bos is not None and len(ids) > 1 and ids[0] == bos)
        return ids[cut:], cut

    sequences, offsets = [], []
    for i, chosen in enumerate(context_rows(groups, rows, k, seed)):
        prefix = contexts[chosen[0]] + sep if chosen else []
        for j in chosen[1:]:
            prefix += body(contexts[j])[0] + sep
        target, cut = body(contexts[i])
        room = max(limit - len(target), 1)
        prefix = prefix[-room:] if len(prefix) > room else prefix
        sequences.append(prefix + target)
        offsets.append(len(prefix) - cut)
    scored = loglik.score(model, sequences, None, batch_size)
    with_context = np.array([s.token_logprobs[o + start :].mean() for s, o in zip(scored, offsets)])
    return np.asarray(alone, float) - with_context


def share(dropped: np.ndarray) -> float:
    """CoDeC's dataset score: the share of documents whose likelihood fell with the context."""
    dropped = np.asarray(dropped, float)
    return float((dropped > 0).mean()) if len(dropped) else float("nan")
