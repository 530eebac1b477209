"""Log-probabilities of whole token sequences under a causal LM, with a sliding window.

A sequence longer than the context c is cut into windows starting at 0, s, 2s, ...; each window
predicts only the tokens no earlier window predicted, from up to c previous tokens. The first
token of a sequence has no context and is not counted.
"""

from __future__ import annotations

from collections.abc import Sequence

from tqdm import tqdm

from harness.core.engine.loglik import inference_mode


def windows(length: int, context: int, stride: int) -> list[tuple[int, int, int]]:
    """(start, end, first_target) per window: tokens [start, end) go in, targets [first_target, end)."""
    if not 0 < stride <= context:
        raise ValueError(f"need 0 < stride <= context, got stride {stride}, context {context}")
    out, done, start = [], 1, 0
    while done < length:
        end = min(start + context, length)
        out.append((start, end, done))
        done = end
        start += stride
    return out


@inference_mode
def logprob_one(model, ids: Sequence[int], context: int, stride: int) -> float:
    """The reference algorithm: one window per forward pass, one sequence at a time."""
    import torch

    total = 0.0
    for start, end, first in windows(len(ids), context, stride):
        x = torch.tensor([ids[start:end]], device=model.device)
        logp = torch.log_softmax(model(x).logits[0, :-1].float(), dim=-1)
        targets = x[0, 1:]
        picked = logp.gather(1, targets[:, None])[:, 0]
        total += float(picked[first - start - 1 :].sum())
    return total


@inference_mode
def logprobs_batched(
    model,
    sequences: Sequence[Sequence[int]],
    context: int,
    stride: int,
    batch_size: int,
    progress: bool = False,
) -> list[float]:
    """The same log-probabilities, many windows per forward pass.

    Identical sequences are scored once; windows are sorted by length so batches carry little
    padding; padding is on the right and masked, so it never changes a counted token.
    """
    import torch

    distinct = {tuple(s): None for s in sequences}
    jobs = [(seq, w) for seq in distinct for w in windows(len(seq), context, stride)]
    jobs.sort(key=lambda j: j[1][1] - j[1][0])
    sums = dict.fromkeys(distinct, 0.0)
    bar = tqdm(total=len(jobs), desc="scoring windows", unit="window", disable=not progress)
    for i in range(0, len(jobs), batch_size):
        chunk = jobs[i : i + batch_size]
        width = max(end - start for _, (start, end, _) in chunk)
        ids = torch.zeros((len(chunk), width), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, (seq, (start, end, _)) in enumerate(chunk):
            ids[row, : end - start] = torch.tensor(seq[start:end])
            mask[row, : end - start] = 1
        logits = model(input_ids=ids.to(model.device), attention_mask=mask.to(model.device)).logits
        logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
        picked = logp.gather(2, ids[:, 1:, None].to(logp.device))[..., 0].cpu()
        for row, (seq, (start, end, first)) in enumerate(chunk):
            sums[seq] += float(picked[row, first - start - 1 : end - start - 1].sum())
        bar.update(len(chunk))
    bar.close()
    return [sums[tuple(s)] for s in sequences]
