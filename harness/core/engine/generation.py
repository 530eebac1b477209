"""Text generation from prompts with transformers' `generate`, as a generative task's answers are made
outside lm-eval (a method's pseudo-labels): left-padded batches, stopped at the task's stop strings, the
new text alone."""

from __future__ import annotations

import torch


@torch.inference_mode()
def generate(
    model,
    tokenizer,
    prompts: list[str],
    max_tokens: int,
    until: tuple[str, ...] = (),
    batch_size: int = 8,
    allowed=None,
) -> list[str]:
    """Each prompt's greedy continuation of at most `max_tokens` tokens, cut before the first stop string
    (`until`), as lm-eval's HF model generates a generate_until request (`allowed`: transformers'
    prefix_allowed_tokens_fn, the tokens each step may take)."""
    was_training, side = model.training, tokenizer.padding_side
    model.eval()
    tokenizer.padding_side = "left"  # the new tokens start at one column for every row
    out: list[str] = []
    try:
        for start in range(0, len(prompts), batch_size):
            batch = tokenizer(prompts[start : start + batch_size], return_tensors="pt", padding=True)
            batch = {k: v.to(model.device) for k, v in batch.items()}
            ids = model.generate(
                **batch,
                max_new_tokens=max_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
                stop_strings=list(until) or None,
                tokenizer=tokenizer if until else None,
                prefix_allowed_tokens_fn=allowed,
            )
            for row in ids[:, batch["input_ids"].shape[1] :]:
                text = tokenizer.decode(row, skip_special_tokens=True)
                ends = [text.find(u) for u in until if u and u in text]
                out.append(text[: min(ends)] if ends else text)
    finally:
        tokenizer.padding_side = side
        model.train(was_training)
    return out
