"""`hf-prompt-once`: lm-eval's HF model with one change, how log-likelihoods are computed.

lm-eval's `hf` runs every (context, continuation) request as its own sequence and shares a context only
between one-token continuations. This model groups the requests by context, runs each distinct context
once (batched across documents) and scores every continuation from that context's KV cache
(`harness.core.engine.loglik`). The sequence scored is lm-eval's `context_enc + continuation_enc`, as `hf`
scores it, so the answers are the same `(log-likelihood, is_greedy)` pairs in the same order; loading,
PEFT adapters, 4-bit bases, tasks, filters, metrics and `--log_samples` are all HFLM's and lm-eval's.

    lm_eval --model hf-prompt-once --model_args pretrained=BASE,peft=ADAPTER --tasks ...
"""

from __future__ import annotations

import logging

import torch
from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM
from tqdm import tqdm

from harness.core.engine import adapters, loglik
from harness.scoring.lm_eval_registration import NAME

log = logging.getLogger(__name__)


@register_model(NAME)
class PromptOnceLM(HFLM):
    # False: every context runs whole, the tokens all contexts of a batch start with included
    share_prefix: bool = True
    # set to {} to keep each (context, continuation) request's continuation length in tokens, as scored:
    # the study's rule (the mean of a class's token log-probs) reads it (zero_shot.score)
    continuation_tokens: dict | None = None
    # a PEFT model's adapters scored together ('__base__': none): every request is scored under each of
    # them in one forward (PEFT's adapter_names per row), and `scoring_as` names the one lm-eval reads
    # now; the others' answers wait in `answered` for its next `evaluate` of the same requests
    models: tuple[str, ...] = ()
    scoring_as: str | None = None
    answered: dict | None = None

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, override_bs: int | None = None):
        if self.continuation_tokens is not None:
            self.continuation_tokens.update((key, len(x)) for key, _, x in requests if key is not None)
        if not self.models:
            return self._answers(requests, disable_tqdm, override_bs, (None,))[None]
        keys = [(tuple(c), tuple(x)) for _, c, x in requests]
        self.answered = {} if self.answered is None else self.answered
        if not all((self.scoring_as, k) in self.answered for k in keys):
            found = self._answers(requests, disable_tqdm, override_bs, self.models)
            for name, answers in found.items():
                self.answered.update(((name, k), a) for k, a in zip(keys, answers))
        return [self.answered[self.scoring_as, k] for k in keys]

    def _answers(self, requests, disable_tqdm, override_bs, names) -> dict:
        """Each request's (log-likelihood, is_greedy) under each of `names` (None: the model as it is)."""
        reason = self._unshareable()
        if reason:
            log.warning("%s: every request scored with hf's path: %s", NAME, reason)
            return self._hf_path(requests, disable_tqdm, override_bs, names)
        # HFLM cuts a pair longer than the model's window from the left, changing the context it reads;
        # a continuation the tokenizer merged whole into the context has no token to score (HFLM refuses it)
        long = [i for i, (_, c, x) in enumerate(requests) if not x or len(c) + len(x) > self.max_length + 1]
        answers = {name: [None] * len(requests) for name in names}
        if long:
            why = "longer than the window, or no continuation token"
            log.warning(
                "%s: %d of %d requests (%s) scored with hf's path", NAME, len(long), len(requests), why
            )
            theirs = self._hf_path([requests[i] for i in long], True, override_bs, names)
            for name in names:
                for i, answer in zip(long, theirs[name]):
                    answers[name][i] = answer
        try:
            self._from_shared_contexts(requests, set(long), answers, disable_tqdm, override_bs)
        except loglik.NoCacheError as err:
            log.warning("%s: every request scored with hf's path: %s", NAME, err)
            return self._hf_path(requests, disable_tqdm, override_bs, names)
        return answers

    def _hf_path(self, requests, disable_tqdm, override_bs, names) -> dict:
        """HFLM's own answers under each name: one adapter active at a time."""
        out = {}
        for name in names:
            with adapters.active(self.model, name):
                out[name] = super()._loglikelihood_tokens(requests, disable_tqdm, override_bs)
        return out

    def _unshareable(self) -> str | None:
        """Why this model's requests cannot share a context's cache (None: they can)."""
        if self.backend != "causal":
            return f"a {self.backend} model reads the context in its encoder"
        peft_config = getattr(self.model, "active_peft_config", None)
        if peft_config is not None and peft_config.is_prompt_learning:
            return "a prompt-learning adapter adds virtual tokens in front of every sequence"
        return None

    def _from_shared_contexts(self, requests, skip, answers, disable_tqdm, override_bs) -> None:
        """Fill `answers` ({name: a list per request}) for every request not in `skip`: distinct contexts
        longest first, `batch_size` at a time under every name, each with its distinct continuations."""
        groups: dict[tuple, dict[tuple, list[int]]] = {}
        for i, (_, context, continuation) in enumerate(requests):
            if i not in skip:
                groups.setdefault(tuple(context), {}).setdefault(tuple(continuation), []).append(i)
        contexts = sorted(groups, key=len, reverse=True)
        batch_size = self._batch_size_for(requests, override_bs)
        pbar = tqdm(total=len(requests) - len(skip), disable=disable_tqdm or self.rank != 0, desc=NAME)
        for start in range(0, len(contexts), batch_size):
            batch = contexts[start : start + batch_size]
            conts = [list(groups[c]) for c in batch]
            with torch.autocast(
                device_type=self.device.type,
                dtype=self.mixed_precision_dtype,
                enabled=self.mixed_precision_dtype is not None,
            ):
                scored = loglik.score_under(
                    self.model,
                    list(answers),
                    batch,
                    conts,
                    len(batch),
                    context_logprobs=False,  # only each class's tokens: the context's last position
                    softmax_dtype=self.softmax_dtype,
                    share_prefix=self.share_prefix,
                )
            for name, under in scored.items():
                for context, cs, s in zip(batch, conts, under):
                    for continuation, answer in zip(cs, s.choices):
                        for i in groups[context][continuation]:
                            answers[name][i] = answer
            for context, cs in zip(batch, conts):
                for continuation in cs:
                    for i in groups[context][continuation]:
                        if requests[i][0] is not None and None in answers:  # lm-eval's --use_cache
                            self.cache_hook.add_partial("loglikelihood", requests[i][0], answers[None][i])
                        pbar.update(1)
        pbar.close()

    def _batch_size_for(self, requests, override_bs: int | None) -> int:
        """Contexts per forward: the batch size given, or for `auto` the one HFLM finds for the longest
        request (a context pass holds less than HFLM's pass over context + continuation)."""
        if self.batch_size != "auto":
            return int(self.batch_size)
        if override_bs:
            return override_bs
        longest = max(range(len(requests)), key=lambda i: len(requests[i][1]) + len(requests[i][2]))
        return self._detect_batch_size(requests, longest)
