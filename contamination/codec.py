"""CoDeC (Zawalski et al. 2025, "Detecting Data Contamination in LLMs via In-Context Learning"): how a
document's likelihood changes when other documents of the same set are put in front of it.

Per document, the mean log-probability of its scored tokens alone, and again with `k` other documents
of its set before it; CoDeC's delta is the second minus the first. On a set the model has not seen, the
others teach it the set's style and the document gains (delta > 0); on a set it has memorised, they
add nothing it does not know and disturb what it recalls, and the document loses (delta < 0). The
dataset's score is the share of its documents that lose: the paper reads a high share as
contamination and a low one as an unseen set, with no reference set needed.

As the authors' demo scores it (its `token_range=(10, -1)`, `num_context_examples=1`, contexts joined
by a blank line): the first 10 tokens of a document and its last are not scored, and k is 1 where
CoDeC runs (the authors found 1 sufficient; a grid runs it only when codec_context
is set). Differences, each for a reason:
- a document here is a zero-shot prompt: the instruction every prompt shares and the answer template
  every prompt ends with are not its own, so the span counts from its own text (the tokens between
  them); a context document teaches those parts, and scoring them would read that lesson;
- a document whose own text has 12 tokens or fewer is scored on what the cut leaves, at least one
  token (the authors drop it; a split of short questions would have nothing left);
- the k context documents are drawn per document, as the authors draw them, by a generator seeded with
  (seed, the document's row); `codec_block` B > 1 draws one per block of B documents of a set (in row
  order) from the set's documents outside it, read from one KV cache: a third cheaper at B 8, but a
  block's drops then move together, so its test permutes whole blocks (block_test), not documents;
  where the whole would exceed the model's positions, the context is cut from the left.
Stored as the drop (minus delta), so that higher reads as member-like, as every other exposure score does.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from harness.core.design import seeds
from harness.core.design.power import RESAMPLES
from harness.core.plumbing.recipe import recipe_table

SEPARATOR = "\n\n"  # between the context documents and before the scored one
SKIP_FIRST = 10  # the authors' token_range (10, -1): a document's first 10 tokens are not scored ...
DROP_LAST = 1  # ... nor its last one
BLOCK = 1  # documents that share one sampled context by default: one each, as the authors draw them
BLOCK_COLUMN = "codec_block"  # a score table's column of each document's block, where blocks hold several


def shared_suffix(sequences: Sequence[Sequence[int]]) -> int:
    """Tokens at the end of every sequence that are the same in all (kept below the shortest)."""
    from harness.core.engine import loglik  # torch: imported where a model scores, not where the test reads

    return loglik.shared_prefix([list(reversed(s)) for s in sequences])


def span(start: int, end: int) -> tuple[int, int]:
    """The scored tokens [a, b) of a document whose own tokens are [start, end), as the authors cut them."""
    a = min(start + SKIP_FIRST, max(end - DROP_LAST - 1, start))
    return a, max(end - DROP_LAST, a + 1)


def blocks(
    groups: Sequence, rows: Sequence[int], k: int, seed: int, block: int = BLOCK
) -> list[tuple[list[int], list[int]]]:
    """The documents (by position) cut into blocks of at most `block` of one group, in row order, each
    with the positions of the k documents of its group, outside the block, put before every one of its
    documents (drawn by a generator seeded with (seed, the block's first row))."""
    groups, rows, out = np.asarray(groups), np.asarray(rows), []
    for g in dict.fromkeys(groups.tolist()):
        members = [int(i) for i in np.flatnonzero(groups == g)]
        members.sort(key=lambda i: int(rows[i]))
        size = max(min(block, len(members) - k), 1)
        for start in range(0, len(members), size):
            chunk = members[start : start + size]
            others = np.array([i for i in members if i not in chunk])
            rng = seeds.document(seed, rows[chunk[0]])
            out.append((chunk, [int(j) for j in rng.permutation(others)[:k]]))
    return out


def block_ids(groups: Sequence, rows: Sequence[int], k: int, block: int) -> np.ndarray:
    """Each document's block (an index into `blocks`' order): the documents that shared one context."""
    out = np.empty(len(rows), dtype=int)
    for b, (members, _) in enumerate(blocks(groups, rows, k, 0, block)):
        out[members] = b
    return out


def block_test(
    test: np.ndarray, extra: np.ndarray, test_blocks: np.ndarray, extra_blocks: np.ndarray, seed: int = 0
) -> dict[str, float]:
    """One-sided permutation p-values of mean(test) - mean(extra), each side's documents in blocks that
    move whole: every way to give the test side as many blocks as it has, or RESAMPLES random ones where
    there are more (then the observed split counts once more). Drops that share a context are not
    independent, so the blocks, not the documents, are what the null hypothesis lets trade places.
    Written here because scipy's permutation_test permutes single observations only."""
    values = np.concatenate([np.asarray(test, float), np.asarray(extra, float)])
    _, which = np.unique(
        np.concatenate([np.asarray(test_blocks), np.asarray(extra_blocks) + np.max(test_blocks) + 1]),
        return_inverse=True,
    )
    sums, counts = np.bincount(which, values), np.bincount(which).astype(float)
    n_test = len(np.unique(test_blocks))
    total = len(sums)

    def effect(chosen: np.ndarray) -> np.ndarray:  # rows of block masks -> mean of test - mean of extra
        t_sum, t_n = chosen @ sums, chosen @ counts
        return t_sum / t_n - (sums.sum() - t_sum) / (counts.sum() - t_n)

    observed = effect(np.arange(total)[None] < n_test)[0]
    if math.comb(total, n_test) <= RESAMPLES:
        picks = np.array(list(itertools.combinations(range(total), n_test)))
        chosen, extra_count = np.zeros((len(picks), total), bool), 0
        np.put_along_axis(chosen, picks, True, axis=1)
    else:
        rng = np.random.default_rng(seed)
        chosen = np.argsort(rng.random((RESAMPLES, total)), axis=1) < n_test
        extra_count = 1
    null = effect(chosen)
    tie = 1e-9 * max(1.0, abs(observed))  # float sums of the same blocks in another order
    return {
        "p_test": float(((null >= observed - tie).sum() + extra_count) / (len(null) + extra_count)),
        "p_extra": float(((null <= observed + tie).sum() + extra_count) / (len(null) + extra_count)),
        "blocks": total,
    }


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
    block: int = BLOCK,
) -> np.ndarray:
    """Per document: the mean log-probability of its scored span alone (`alone`: each document's token
    log-probabilities from the exposure pass, index t - 1 for token t) minus the same tokens' mean with k
    documents of its group before it. Where `block` > 1, a block's documents share their context, so the
    context (and the instruction every prompt starts with) is read once per block, from its KV cache."""
    from harness.core.engine import loglik

    limit = getattr(model.config, "max_position_embeddings", None) or 1 << 30
    sep = tokenizer(SEPARATOR, add_special_tokens=False)["input_ids"]
    bos = getattr(tokenizer, "bos_token_id", None)
    prefix_len, suffix_len = loglik.shared_prefix(contexts), shared_suffix(contexts)

    def body(ids: list[int]) -> tuple[list[int], int]:  # a document without the BOS a tokenizer adds
        cut = int(bos is not None and len(ids) > 1 and ids[0] == bos)
        return ids[cut:], cut

    out = np.full(len(contexts), np.nan)
    for members, chosen in blocks(groups, rows, k, seed, block):
        prefix = contexts[chosen[0]] + sep if chosen else []
        for j in chosen[1:]:
            prefix += body(contexts[j])[0] + sep
        targets = [body(contexts[i]) for i in members]
        room = max(limit - max(len(t) for t, _ in targets), 1)
        prefix = prefix[-room:] if len(prefix) > room else prefix
        scored = loglik.score(model, [prefix + t for t, _ in targets], None, batch_size)
        for i, (_, cut), s in zip(members, targets, scored):
            offset = len(prefix) - cut  # token t of the document alone is token offset + t here
            a, b = span(max(prefix_len, 1), max(len(contexts[i]) - suffix_len, prefix_len + 1))
            with_context = s.token_logprobs[offset + a - 1 : offset + b - 1]
            out[i] = np.mean(alone[i][a - 1 : b - 1]) - np.mean(with_context)
    return out


def share(dropped: np.ndarray) -> float:
    """CoDeC's dataset score: the share of documents whose likelihood fell with the context."""
    dropped = np.asarray(dropped, float)
    return float((dropped > 0).mean()) if len(dropped) else float("nan")


# the authors' demo notebook: NVIDIA-NeMo/Evaluator at 460dcad6,
# packages/nemo-evaluator/examples/notebooks/contamination_detection_demo.ipynb (its cells by index)
RECIPE = recipe_table(
    [
        (
            "score",
            "mean log p of the target alone minus with context (cell 6)",
            "the same, stored as the drop",
            "",
        ),
        ("flag", "a document whose likelihood fell (cell 6)", "the same (the share of a set)", ""),
        (
            "k",
            "1 context document (cells 1, 16, 18, 22)",
            "contamination exposure: 1 by default (prompt format); a grid: codec_context, 0 (off) by "
            "default, 1 in the methods configs",
            "in a grid CoDeC costs 2.4x a document a condition: off unless asked; its shipped records keep "
            "their hash",
        ),
        (
            "context",
            "random others of the set per document, joined by a blank line (cells 6, 7)",
            "the same by default (codec_block 1); codec_block 8: one draw per 8 documents",
            "codec_block 8 is a third cheaper; its 8 drops are not independent, so its test permutes "
            "whole blocks",
        ),
        (
            "span",
            "token_range (10, -1) of the text's log-probs (cell 6)",
            "the same, from the document's own text",
            "a prompt's shared instruction and template are not its own",
        ),
        (
            "short text",
            "12 tokens or fewer, a BOS included: dropped (cell 6: 10 >= log-probs - 1)",
            "scored on at least one token",
            "a split of short questions would be empty",
        ),
        (
            "test",
            "the share, read on its own: near 100% seen, 0-50% unseen (cells 15, 18)",
            "test's drops against extra's",
            "a grid has a reference",
        ),
        (
            "long input",
            "text cut at 2048 characters (cell 7)",
            "context cut from the left",
            "the model's positions",
        ),
    ]
)
