"""TRL's GRPO trainer, reading each prompt once per group of samples.

GRPO samples K completions of a prompt and scores each of them with the policy, the old policy and the
reference. TRL's trainer feeds the prompt once per completion in each of those passes: K prefills when
sampling and K copies in every forward and backward. Here the prompt runs once; its key-value cache is
repeated for the group, and only the completions run on top of it (gradients reach the prompt through the
shared cache). Written by hand because neither TRL nor transformers shares a prefix across a batch.

Everything else is TRL's: its config, loss, logging and callbacks. Two changes of behaviour, both named in
test-time RL's recipe table: a rollout's completions are not shuffled before they are split into
optimizer steps (a step holds whole prompt groups, as TTRL's verl runs them), and the shortcut applies only
to text prompts sampled by transformers' `generate` (vLLM, tools and images take TRL's own path; so
does the policy's forward under gradient checkpointing, which keeps no cache).
"""

from __future__ import annotations

import torch
from trl import GRPOTrainer
from trl.models import unwrap_model_for_generation
from trl.trainer.utils import pad, split_tensor_dict

from harness.core.plumbing.errors import UserError

# the private surface of TRL's GRPOTrainer this trainer overrides or reads, as it stood in the TRL it was
# tested on (1.16): each method's parameters, and the attributes `_plain` reads. TRL changes its private
# methods between releases without notice; where they differ, the trainer refuses to run (check_trl).
TESTED_TRL = "1.16"
PRIVATE = {
    "_generate_single_turn": ["self", "prompt_ids", "images", "multimodal_fields", "num_generations"],
    "_get_per_token_logps_and_entropies": ["self", "model", "input_ids", "attention_mask", "logits_to_keep"],
    "_prepare_inputs": ["self", "generation_batch"],
}


def trl_differs() -> list[str]:
    """What of TRL's private surface differs from the one this trainer was written against."""
    import inspect

    found = []
    for name, leading in PRIVATE.items():
        method = getattr(GRPOTrainer, name, None)
        params = list(inspect.signature(method).parameters) if callable(method) else []
        if params[: len(leading)] != leading:
            found.append(f"{name}{tuple(params[1:]) if params else ' (gone)'}")
    return found


def check_trl() -> None:
    """Refuse a TRL whose private GRPOTrainer methods are not the ones this trainer overrides."""
    differs = trl_differs()
    if differs:
        import trl

        raise UserError(
            f"test-time RL's grouped GRPO overrides private methods of TRL's GRPOTrainer, written against "
            f"TRL {TESTED_TRL}; TRL {trl.__version__} has {', '.join(differs)}. Install trl=={TESTED_TRL}.*"
        )


def groups(rows: list) -> list[tuple[int, int]]:
    """(start, end) of each run of equal consecutive items: TRL repeats a prompt K times in a row."""
    spans, start = [], 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i] != rows[start]:
            spans.append((start, i))
            start = i
    return spans


def left_padded(seqs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids left-padded into one tensor, and their attention mask (TRL's `pad`, as its trainer)."""
    tensors = [torch.tensor(s) for s in seqs]
    ids = pad(tensors, padding_value=pad_id, padding_side="left")
    return ids, pad([torch.ones_like(t) for t in tensors], padding_value=0, padding_side="left")


def checkpointing(model) -> bool:
    """Whether the model recomputes activations in its backward (transformers 5 renamed the flag)."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(model), name) or hasattr(model, name):
            return bool(getattr(model, name))
    return False


def allowed_next(answers: list[list[int]], made: list[int], end: int) -> list[int]:
    """The tokens that keep a completion on one of `answers` (token sequences) after `made`: the next token
    of each answer it is a prefix of, and `end` where it already is an answer; `end` alone past them all."""
    n = len(made)
    ok = {a[n] for a in answers if len(a) > n and a[:n] == made}
    return sorted(ok | ({end} if made in answers or not ok else set()))


def on_answers(rows: list[list[list[int]]], width: int, end: int):
    """`generate`'s prefix_allowed_tokens_fn that keeps sampled row i on one of `rows[i]` (its answers'
    token sequences), its completion starting at position `width`."""

    def keep_on(i: int, seq: torch.Tensor) -> list[int]:
        return allowed_next(rows[i], seq[width:].tolist(), end)

    return keep_on


class GroupedGRPOTrainer(GRPOTrainer):
    """`GRPOTrainer` whose sampling and scoring run each prompt once for its group of completions.

    `answers`, where set, maps a prompt's token ids to the completions it may sample (token sequences):
    sampling draws from the policy's next-token distribution renormalised over the tokens that stay on one
    of them, then ends the completion."""

    answers: dict[tuple[int, ...], list[list[int]]] | None = None
    stop_strings: tuple[str, ...] = ()  # a generative task's: a completion ends after the first of them

    def __init__(self, *args, **kwargs):
        check_trl()  # before a model is wrapped: a TRL of other private methods would fail mid-training
        super().__init__(*args, **kwargs)

    def _plain(self, multimodal_fields=None) -> bool:
        return not (
            self.use_vllm or self.use_transformers_continuous_batching or self.tools or multimodal_fields
        )

    def _generate_single_turn(
        self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False
    ):
        spans = groups([tuple(p) for p in prompt_ids])
        if not self._plain(multimodal_fields) or images or min(len(p) for p in prompt_ids) < 2:
            if self.answers is not None or self.stop_strings:
                raise UserError(
                    "test-time-rl: sampling among the choices, or up to a generative task's stop strings, "
                    "runs on text prompts through transformers' generate; these prompts take TRL's own path "
                    "(vLLM, tools, images or one token): set answers: free in its method settings"
                )
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations)
        device = self.accelerator.device
        ids, mask = left_padded([prompt_ids[a] for a, _ in spans], self._tokenizer.pad_token_id)
        ids, mask = ids.to(device), mask.to(device)
        sizes = torch.tensor([b - a for a, b in spans], device=device)
        constrain = {}
        if self.stop_strings:  # as lm-eval stops a generate_until request
            constrain |= {"stop_strings": list(self.stop_strings), "tokenizer": self._tokenizer}
        if self.answers is not None:  # each sampled row's answers, its prompt's; a completion starts at width
            rows = [self.answers[tuple(prompt_ids[a])] for a, b in spans for _ in range(b - a)]
            constrain["prefix_allowed_tokens_fn"] = on_answers(rows, ids.size(1), self.eos_token_ids[0])
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # as `generate` numbers a left-padded prompt
        with (
            unwrap_model_for_generation(
                self.model_wrapped,
                self.accelerator,
                gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                generation_kwargs=self.generation_kwargs,
                gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
            ) as model,
            torch.no_grad(),
            self._dist.summon_full_params(self.model_wrapped, recurse=False),
        ):
            cache = model(
                input_ids=ids[:, :-1],
                attention_mask=mask[:, :-1],
                position_ids=positions[:, :-1],
                use_cache=True,
                logits_to_keep=1,
            ).cache
            for layer in cache.layers:  # each prompt's cache, once per completion of its group
                layer.keys = layer.keys.repeat_interleave(sizes, dim=0)
                layer.values = layer.values.repeat_interleave(sizes, dim=0)
            out = model.generate(
                input_ids=ids.repeat_interleave(sizes, dim=0),
                attention_mask=mask.repeat_interleave(sizes, dim=0),
                cache=cache,
                generation_config=self.generation_config,
                **constrain,
            )
        completions = []
        for row in out[:, ids.size(1) :].tolist():  # up to and including the first end-of-sequence token
            ends = [i for i, t in enumerate(row) if t in self.eos_token_ids]
            completions.append(row[: ends[0] + 1] if ends else row)
        return completions, None

    def _get_per_token_logps_and_entropies(
        self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False, **kw
    ):
        extra = {k: v for k, v in kw.items() if v is not None and k != "compute_aux_loss"}
        checkpointed = model.training and checkpointing(model)  # it keeps no cache
        if extra or kw.get("compute_aux_loss") or checkpointed or not self._plain():
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, **kw
            )
        width = input_ids.size(1) - logits_to_keep
        keys = [
            (tuple(i), tuple(m))
            for i, m in zip(input_ids[:, :width].tolist(), attention_mask[:, :width].tolist())
        ]
        logps, entropies = [], []
        for a, b in groups(keys):
            lp, ent = self._group_logps(
                model, input_ids[a:b], attention_mask[a:b], logits_to_keep, compute_entropy
            )
            logps.append(lp)
            entropies.append(ent)
        return torch.cat(logps), torch.cat(entropies) if compute_entropy else None, None

    def _group_logps(self, model, ids, mask, keep, compute_entropy):
        """Completion log-probs (and entropies) of rows that share one prompt: the prompt's forward once,
        the completions' on its repeated cache. Positions as TRL's forward numbers them (from 0 at the
        first column, pads included), so each row sees what it would see alone."""
        width, size = ids.size(1) - keep, ids.size(0)
        with self.accelerator.autocast():
            first = model(
                input_ids=ids[:1, :width], attention_mask=mask[:1, :width], use_cache=True, logits_to_keep=1
            )
            cache = first.cache
            cache.batch_repeat_interleave(size)
            logits = first.logits[:, -1:].expand(size, -1, -1)
            if keep > 1:
                rest = model(
                    input_ids=ids[:, width:-1],
                    attention_mask=mask[:, :-1],
                    cache=cache,
                    use_cache=True,
                ).logits
                logits = torch.cat([logits, rest], dim=1)
        logits = logits.float() / self.temperature
        logprobs = logits.log_softmax(-1)
        valid = mask[:, width:].bool()
        token_logps = logprobs.gather(-1, ids[:, width:].unsqueeze(-1)).squeeze(-1).masked_fill(~valid, 0)
        if not compute_entropy:
            return token_logps, None
        entropy = -(logprobs.exp() * logprobs).sum(-1).masked_fill(~valid, 0)
        return token_logps, entropy

    def _prepare_inputs(self, generation_batch):
        """TRL's buffering, without shuffling a rollout's completions: each step holds whole groups."""
        if not self._plain():
            return super()._prepare_inputs(generation_batch)
        if not self.model.training:
            return self._generate_and_score_completions(generation_batch)
        every = self.args.steps_per_generation * self.num_iterations
        if self._step % every == 0 or self._buffered_inputs is None:
            scored = self._generate_and_score_completions(generation_batch)
            self._buffered_inputs = split_tensor_dict(scored, self.args.steps_per_generation)
        return self._buffered_inputs[self._step % self.args.steps_per_generation]
