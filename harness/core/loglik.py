"""Log-likelihoods of a causal LM that read each context once: the context's own tokens, then every
continuation of it scored from the context's KV cache, batched across contexts.

Written here because lm-eval's HFLM runs every (context, continuation) pair as its own sequence
(it shares the context only for one-token continuations), and neither it nor transformers returns
the context's own token log-probabilities, which the exposure test reads.

The token ids are lm-eval's: `encode_pair` splits a (context, continuation) the way HFLM does, and a
continuation is scored exactly as HFLM scores `context_enc + continuation_enc`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch


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


def _distribution_stats(logp: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Per position: mean and standard deviation of log p(z) for z drawn from the model."""
    p = logp.exp()
    mean = (p * logp).sum(-1)
    var = (p * logp.square()).sum(-1) - mean.square()
    return mean.numpy(), var.clamp_min(0).sqrt().numpy()


@torch.inference_mode()
def score(
    model,
    contexts: Sequence[Sequence[int]],
    continuations: Sequence[Sequence[Sequence[int]]] | None = None,
    batch_size: int = 8,
    token_stats: bool = False,
) -> list[Scored]:
    """Score each context (right-padded, `batch_size` at a time, longest first) and then all of its
    continuations in one batched pass from the batch's KV cache. Contexts hold at least one token,
    continuations at least one each. The model is put in eval mode."""
    model.eval()
    continuations = continuations or [[] for _ in contexts]
    device = model.device
    out: list[Scored | None] = [None] * len(contexts)
    order = sorted(range(len(contexts)), key=lambda i: -len(contexts[i]))
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        lengths = [len(contexts[i]) for i in idx]
        width = max(lengths)
        ids = torch.zeros((len(idx), width), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, i in enumerate(idx):
            ids[row, : lengths[row]] = torch.tensor(contexts[i])
            mask[row, : lengths[row]] = 1
        pairs = [(row, cont) for row, i in enumerate(idx) for cont in continuations[i]]
        longest = max((len(c) for _, c in pairs), default=0)
        run = model(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=longest > 1)
        logp = torch.log_softmax(run.logits.float(), dim=-1).cpu()
        cont_logp = None
        if longest > 1:  # the continuations' tokens after the first, from the cache of their context
            cont_logp = _continuations(model, run.past_key_values, pairs, mask, lengths, longest - 1)
        for row, i in enumerate(idx):
            n = lengths[row]
            own = logp[row, : n - 1]
            picked = own.gather(1, ids[row, 1:n, None])[:, 0].numpy()
            stats = _distribution_stats(own) if token_stats else (None, None)
            out[i] = Scored(picked, [], *stats)
        last = logp[torch.arange(len(idx)), torch.tensor(lengths) - 1]  # each predicts its first token
        for r, (row, cont) in enumerate(pairs):
            first = last[row]
            total, greedy = float(first[cont[0]]), int(first.argmax()) == cont[0]
            if len(cont) > 1:
                rest = cont_logp[r, : len(cont) - 1]
                target = torch.tensor(cont[1:])
                total += float(rest.gather(1, target[:, None]).sum())
                greedy = greedy and bool((rest.argmax(-1) == target).all())
            out[idx[row]].choices.append((total, greedy))
    return out


def _continuations(model, cache, pairs, mask, lengths, width) -> torch.Tensor:
    """Log-probs [pairs, width, vocab] of every continuation but its last token, run in one batch on
    its context's cache (one cache row per pair); padding of contexts and continuations is masked."""
    rows = torch.tensor([row for row, _ in pairs])
    cache.reorder_cache(rows.to(model.device))
    ids = torch.zeros((len(pairs), width), dtype=torch.long)
    cont_mask = torch.zeros_like(ids)
    for r, (_, cont) in enumerate(pairs):
        ids[r, : len(cont) - 1] = torch.tensor(cont[:-1])
        cont_mask[r, : len(cont) - 1] = 1
    positions = torch.tensor(lengths)[rows, None] + torch.arange(width)[None]
    run = model(
        input_ids=ids.to(model.device),
        attention_mask=torch.cat([mask[rows], cont_mask], dim=1).to(model.device),
        position_ids=positions.to(model.device),
        past_key_values=cache,
        use_cache=False,
    )
    return torch.log_softmax(run.logits.float(), dim=-1).cpu()
