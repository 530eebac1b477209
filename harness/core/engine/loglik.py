"""Log-likelihoods of a causal LM that read each context once: the context's own tokens, then every
continuation of it scored from the context's KV cache, batched across contexts. The tokens that every
context starts with (a task's instruction) are read once per call, and each batch starts from them.

Written here because lm-eval's HFLM runs every (context, continuation) pair as its own sequence
(it shares the context only for one-token continuations), and neither it nor transformers returns
the context's own token log-probabilities, which the exposure test reads.

The token ids are lm-eval's: `encode_pair` splits a (context, continuation) the way HFLM does, and a
continuation is scored exactly as HFLM scores `context_enc + continuation_enc`.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch


def inference_mode(fn):
    """`torch.inference_mode()` as a decorator that imports torch at the first call, not at import (so
    that `--help` and the settings' checks do not wait for it); torch's own decorator needs torch first."""

    @functools.wraps(fn)
    def scored(*args, **kwargs):
        import torch

        with torch.inference_mode():
            return fn(*args, **kwargs)

    return scored


@dataclass
class Scored:
    """One context under one model."""

    token_logprobs: np.ndarray  # log p(token t | tokens < t) for t = 1 .. len(context) - 1
    choices: list[tuple[float, bool]]  # per continuation: (summed log p, every token greedy)
    token_mean: np.ndarray | None = field(default=None)  # E[log p] under the model, per position
    token_std: np.ndarray | None = field(default=None)  # its standard deviation (Min-K%++ reads both)


def encode_pair(tokenizer, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) as lm-eval's causal models split them: trailing spaces of the
    context move to the continuation; the pair is encoded whole and cut at the context's length."""
    spaces = len(context) - len(context.rstrip())
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    whole = tokenizer(context + continuation)["input_ids"]
    ctx = tokenizer(context)["input_ids"]
    return ctx, whole[len(ctx) :]


def distribution_stats(logp: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Per position: mean and standard deviation of log p(z) for z drawn from the model. The spread is
    summed around the mean, which float32 holds (E[x^2] - E[x]^2 cancels in float32 and moved with the
    batch's padding); float64 would double the memory read at every position of every document."""
    logp = logp.float()
    p = logp.exp()
    mean = (p * logp).sum(-1)
    var = (p * (logp - mean[..., None]).square()).sum(-1)
    return mean.numpy(), var.sqrt().numpy()


# The continuations of one context batch run in passes of at most this many rows per context row: each
# row holds a copy of its context's KV cache, and 4 of them take less memory than the full-vocabulary
# log-probs of one row that a plain forward of context + continuation keeps.
ROWS_PER_CONTEXT = 4


def score(model, contexts, continuations=None, batch_size: int = 8, **how) -> list[Scored]:
    """`score_under` one model: the model as given (no adapter chosen per row)."""
    return score_under(model, [None], contexts, continuations, batch_size, **how)[None]


@inference_mode
def score_under(
    model,
    names: Sequence[str | None],
    contexts: Sequence[Sequence[int]],
    continuations: Sequence[Sequence[Sequence[int]]] | None = None,
    batch_size: int = 8,
    token_stats: bool = False,
    context_logprobs: bool = True,
    softmax_dtype: torch.dtype | str | None = "float32",
    share_prefix: bool = True,
) -> dict[str | None, list[Scored]]:
    """Score each context (right-padded, `batch_size` at a time, longest first) and then all of its
    continuations from the batch's KV cache, under each of `names`: a PEFT model's adapters, read in
    one forward by PEFT's `adapter_names` per row ('__base__': no adapter; [None]: the model as given).
    A forward holds the same contexts, padded alike, under every name. With `share_prefix`, the tokens
    every context starts with (a prompt's instruction) run once, and each batch reads them from that
    pass's cache. Contexts hold at least one token, continuations at least one each. Without
    `context_logprobs` only each context's last position is projected on the vocabulary (`token_logprobs`
    is then empty). Log-softmax runs in `softmax_dtype` (a torch dtype or its name; None: the logits'
    dtype). The model is put in eval mode."""
    import torch

    if isinstance(softmax_dtype, str):
        softmax_dtype = getattr(torch, softmax_dtype)
    model.eval()
    continuations = continuations or [[] for _ in contexts]
    out = {name: [None] * len(contexts) for name in names}
    order = sorted(range(len(contexts)), key=lambda i: -len(contexts[i]))
    assert context_logprobs or not token_stats, "token_stats are statistics of the context log-probs"
    last_only = not context_logprobs and _keeps_logits(model)
    head = None  # the shared prefix's pass
    if share_prefix:
        head = _Prefix.run(model, names, contexts, context_logprobs, token_stats, softmax_dtype, last_only)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        rows = [(k, i) for k in range(len(names)) for i in idx]  # (name, context) of each forward row
        pairs = [(row, cont) for row, (_, i) in enumerate(rows) for cont in continuations[i]]
        row_names = [names[k] for k, _ in rows]
        batch = _Batch.forward(model, [contexts[i] for _, i in rows], head, pairs, last_only, rows, row_names)
        logp, last = batch.logprobs(context_logprobs, softmax_dtype)
        for row, (k, i) in enumerate(rows):
            picked, stats = np.empty(0, dtype=np.float32), (None, None)
            if context_logprobs:
                picked, stats = batch.own(row, logp, token_stats)
                if head:
                    picked, stats = head.joined(k, contexts[i], picked, stats)
            out[names[k]][i] = Scored(picked, [], *stats)
        rest = {}
        if batch.needs_cache:  # the continuations' tokens after the first, from the cache of their context
            rest = _continuations(
                model, batch.run.past_key_values, pairs, batch.mask, batch_size, softmax_dtype, row_names
            )
        for r, (row, cont) in enumerate(pairs):
            total, greedy = float(last[row, cont[0]]), int(last[row].argmax()) == cont[0]
            if r in rest:
                total, greedy = total + rest[r][0], greedy and rest[r][1]
            k, i = rows[row]
            out[names[k]][i].choices.append((total, greedy))
    return out


def _adapters(names: Sequence[str | None]) -> dict:
    """The forward's keyword choosing each row's adapter (none for the model as given)."""
    return {} if names[0] is None else {"adapter_names": list(names)}


@dataclass
class _Batch:
    """One batch of contexts run after the shared prefix (if any): the model's output, and where each
    context's last position is among the logits it kept."""

    run: Any  # the model's output
    ids: torch.Tensor
    mask: torch.Tensor  # the prefix's positions included
    lengths: list[int]  # each context's own tokens after the prefix
    at: torch.Tensor  # each context's last position, as an index into the logits kept
    needs_cache: bool

    @classmethod
    def forward(cls, model, contexts, head, pairs, last_only: bool, rows, names) -> _Batch:
        import torch

        start_at = head.length if head else 0  # each batch runs its contexts' tokens from here
        lengths = [len(c) - start_at for c in contexts]
        ids, mask = _right_padded([c[start_at:] for c in contexts])
        needs_cache = any(len(c) > 1 for _, c in pairs)
        kwargs = {}
        if last_only:  # the distinct last positions of the batch's contexts
            keep = sorted({n - 1 for n in lengths})
            kwargs["logits_to_keep"] = torch.tensor(keep, device=model.device)
        if head:
            kwargs["past_key_values"] = head.cache([k for k, _ in rows])
            kwargs["position_ids"] = (start_at + torch.arange(ids.shape[1]))[None].to(model.device)
            mask = torch.cat([torch.ones((len(contexts), start_at), dtype=mask.dtype), mask], dim=1)
        out = model(
            input_ids=ids.to(model.device),
            attention_mask=mask.to(model.device),
            use_cache=needs_cache,
            **kwargs,
            **_adapters(names),
        )
        if needs_cache and out.past_key_values is None:
            raise NoCacheError(f"{type(model).__name__} returned no KV cache")
        at = torch.tensor([keep.index(n - 1) for n in lengths] if last_only else [n - 1 for n in lengths])
        return cls(out, ids, mask, lengths, at, needs_cache)

    def logprobs(self, context_logprobs: bool, softmax_dtype) -> tuple[torch.Tensor | None, torch.Tensor]:
        """(every position's log-probs, or None; each row's prediction of its first continuation token)."""
        import torch

        rows = torch.arange(len(self.lengths))
        if context_logprobs:
            logp = torch.log_softmax(self.run.logits, dim=-1, dtype=softmax_dtype).cpu()
            return logp, logp[rows, self.at]
        dev = self.run.logits.device
        return None, torch.log_softmax(
            self.run.logits[rows.to(dev), self.at.to(dev)], -1, dtype=softmax_dtype
        ).cpu()

    def own(self, row: int, logp: torch.Tensor, token_stats: bool):
        """A context's own tokens' log-probs (and their distribution statistics, when asked)."""
        own = logp[row, : self.lengths[row] - 1]
        picked = own.gather(1, self.ids[row, 1 : self.lengths[row], None])[:, 0].float().numpy()
        return picked, distribution_stats(own.float()) if token_stats else (None, None)


@dataclass
class _Prefix:
    """The tokens every context starts with, run once under each name: their KV cache and, for context
    log-probs, the log-probs at their positions (the last one predicts each context's first token of its
    own)."""

    length: int
    past: object  # the prefix's KV cache, a row per name
    logp: torch.Tensor | None  # (names, length, vocab)
    stats: list | None  # distribution_stats of logp, per name

    @classmethod
    def run(
        cls, model, names, contexts, context_logprobs, token_stats, softmax_dtype, last_only
    ) -> _Prefix | None:
        """None when fewer than two contexts share a first token (nothing to save)."""
        import torch

        length = shared_prefix(contexts) if len(contexts) > 1 else 0
        if length == 0:
            return None
        ids = torch.tensor([list(contexts[0][:length])] * len(names), device=model.device)
        keep = {"logits_to_keep": 1} if last_only else {}  # no position of the prefix is projected
        keep |= _adapters(names)
        run = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True, **keep)
        if run.past_key_values is None:
            raise NoCacheError(f"{type(model).__name__} returned no KV cache")
        logp = stats = None
        if context_logprobs:
            logp = torch.log_softmax(run.logits, dim=-1, dtype=softmax_dtype).cpu()
            stats = [distribution_stats(one.float()) for one in logp] if token_stats else None
        return cls(length, run.past_key_values, logp, stats)

    def cache(self, names: list[int]):
        """A copy of the prefix's cache for a batch of contexts, each under the name of that index."""
        import torch

        own = copy.deepcopy(self.past)
        if len(set(names)) == 1 and names[0] == 0:
            own.batch_repeat_interleave(len(names))
        else:
            own.reorder_cache(torch.tensor(names))
        return own

    def joined(self, k: int, context, picked: np.ndarray, stats: tuple) -> tuple[np.ndarray, tuple]:
        """A context's token log-probs (and statistics) over its whole length under name `k`: the
        prefix's, then its own."""
        import torch

        logp = self.logp[k]
        own_first = logp[-1, context[self.length]].reshape(1).float().numpy()
        tokens = torch.tensor(context[1 : self.length], dtype=torch.long)
        inner = logp[:-1].gather(1, tokens[:, None])[:, 0].float().numpy()
        picked = np.concatenate([inner, own_first, picked])
        if stats[0] is not None:
            stats = tuple(np.concatenate([mine, theirs]) for mine, theirs in zip(self.stats[k], stats))
        return picked, stats


def shared_prefix(sequences: Sequence[Sequence[int]]) -> int:
    """Tokens at the start of every sequence that are the same in all (kept below the shortest)."""
    first, shortest = sequences[0], min(map(len, sequences))
    n = 0
    while n < shortest - 1 and all(s[n] == first[n] for s in sequences):
        n += 1
    return n


class NoCacheError(RuntimeError):
    """The model returns no KV cache to score continuations from."""


def _keeps_logits(model) -> bool:
    """Whether the model (under its PEFT wrapper, if any) projects only the positions it is asked for."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "logits_to_keep" in inspect.signature(base.forward).parameters


def _right_padded(seqs: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    ids = torch.zeros((len(seqs), max(map(len, seqs))), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, seq in enumerate(seqs):
        ids[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
    return ids, mask


def _continuations(
    model, cache, pairs, mask, batch_size, softmax_dtype, names
) -> dict[int, tuple[float, bool]]:
    """(summed log p, all greedy) of every continuation's tokens after its first, keyed by the pair's
    index; run in passes of `ROWS_PER_CONTEXT * batch_size` rows, each row on a copy of its context's
    cache (the last pass reuses the cache itself) under its context's name, padding masked."""
    import torch

    lengths = mask.sum(1)
    todo = [r for r, (_, cont) in enumerate(pairs) if len(cont) > 1]
    step = ROWS_PER_CONTEXT * batch_size
    out = {}
    for start in range(0, len(todo), step):
        part = todo[start : start + step]
        rows = torch.tensor([pairs[r][0] for r in part])
        own = cache if start + step >= len(todo) else copy.deepcopy(cache)
        own.reorder_cache(rows.to(model.device))
        ids, cont_mask = _right_padded([pairs[r][1][:-1] for r in part])
        positions = lengths[rows, None] + torch.arange(ids.shape[1])[None]
        run = model(
            input_ids=ids.to(model.device),
            attention_mask=torch.cat([mask[rows], cont_mask], dim=1).to(model.device),
            position_ids=positions.to(model.device),
            past_key_values=own,
            use_cache=False,
            **_adapters([names[pairs[r][0]] for r in part]),
        )
        logp = torch.log_softmax(run.logits, dim=-1, dtype=softmax_dtype).cpu()
        for k, r in enumerate(part):
            target = torch.tensor(pairs[r][1][1:])
            rest = logp[k, : len(target)]
            out[r] = (float(rest.gather(1, target[:, None]).sum()), bool((rest.argmax(-1) == target).all()))
    return out
