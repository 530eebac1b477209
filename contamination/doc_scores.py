"""Per-document exposure scores under one model: how well it predicts a document's text as TAPT saw it,
and how much it prefers the document's true class.

Per doc, three numbers (higher: more member-like), and a fourth where asked for:
- `text`: the mean log-probability of the document's own tokens (those after the prefix every
  document shares, such as the instruction of a prompt): minus its loss;
- `mink`: Min-K%++ (Zhang et al. 2024) over the same tokens: each token's log-probability
  standardised by the mean and spread of log p under the model at that position, averaged over the
  lowest K% of the tokens;
- `margin`: the log-odds of the true class against the others, from the class log-likelihoods as
  lm-eval scores them (`log p(c_true) - logsumexp_{c != true} log p(c)`);
- `confidence`: the model's probability of its own top choice among the choices, as a log
  (`max_c log p(c) - logsumexp_c log p(c)`): training on its own answers (self-training, test-time RL)
  sharpens it on the documents it trained on, with no gold label read;
- `codec` (causal LMs, with `codec_context` k > 0): CoDeC's drop, how much the document's own text
  loses when k other documents of its split stand before it (contamination.codec: the authors' span).

Two formats of text: `prompt` (the zero-shot prompt that prompt TAPT trains on, scored by a causal
LM; the classes as lm-eval's continuations) and `raw` (the raw text that raw-text TAPT trains on:
causal-LM for a decoder; for an encoder masked-LM under a fixed seeded mask, with each class name's
tokens masked together after the text, as the leak condition writes them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from contamination import codec
from harness.core.design import seeds
from harness.core.engine import loglik, models
from harness.core.plumbing.errors import UserError
from harness.core.plumbing.plugins import called
from harness.tasks.protocol import Spec

MINK_FRACTION = 0.2  # Min-K%++'s K: the share of lowest-scoring tokens averaged (the paper's default)
MLM_FRACTION = 0.15  # tokens masked per text for an encoder's text score (as in MLM training)
RAW_LABEL_DELIMITER = "\n"  # the leak condition of the classifier flow writes "<text>\n<class name>"


@dataclass(frozen=True)
class ScoreInputs:
    """What a plug-in score reads, per condition's model: the documents (split, row, label, prompt), each
    one's prompt tokens, each one's token log-probabilities alone (index t - 1 for token t), the length
    of the prefix every prompt shares, the settings the grid gave it, a seed and a batch size."""

    model: Any
    tokenizer: Any
    docs: pd.DataFrame
    tokens: list[list[int]]
    alone: list[np.ndarray]
    shared: int
    settings: dict
    seed: int
    batch_size: int


@dataclass(frozen=True)
class Score:
    """A per-document score a detector needs, computed in every exposure pass of a grid that names it in
    `scores`: `compute(ScoreInputs)` gives one number per document, higher where the model read it. Its
    `detector` (by default the uncalibrated two-sample test of test against extra documents) is
    registered under the score's name when the grid loads it."""

    name: str
    compute: Callable[[ScoreInputs], np.ndarray]
    sees: str = "text"
    detector: Any = None


def mink_plus_plus(logprobs: np.ndarray, mean: np.ndarray, std: np.ndarray) -> float:
    z = (logprobs - mean) / np.maximum(std, 1e-6)
    k = max(1, int(np.ceil(MINK_FRACTION * len(z))))
    return float(np.sort(z)[:k].mean())


def margins(choices: list[list[float]], labels: np.ndarray) -> np.ndarray:
    from scipy.special import logsumexp

    out = []
    for ll, y in zip(choices, labels):
        ll = np.asarray(ll)
        out.append(ll[y] - logsumexp(np.delete(ll, y)))
    return np.array(out)


def confidences(choices: list[list[float]]) -> np.ndarray:
    """Per document, the log-probability of the model's top choice, normalised over the choices."""
    from scipy.special import logsumexp

    return np.array([np.max(ll) - logsumexp(ll) for ll in choices])


def frame(docs: pd.DataFrame, text, mink, ll: list[list[float]], drops=None) -> pd.DataFrame:
    """The per-document scores from the text scores and each document's choice log-likelihoods `ll`;
    `codec` is NaN where CoDeC was not run. A generative task's document has one choice, its gold
    answer: its label statistic is that answer's log-likelihood after the prompt (no other choice to
    set it against), and it has no confidence statistic (the model's own answer would need a generation
    per document), so the exposure test leaves that one out."""
    generative = all(len(x) == 1 for x in ll)
    out = pd.DataFrame(
        {
            "split": docs["split"].to_numpy(),
            "row": docs["row"].to_numpy(),
            "label": docs["label"].to_numpy(),
            "text": text,
            "mink": mink,
            "margin": np.array([x[0] for x in ll]) if generative else margins(ll, docs["label"].to_numpy()),
            "confidence": np.full(len(docs), np.nan) if generative else confidences(ll),
            "codec": np.full(len(docs), np.nan) if drops is None else drops,
        }
    )
    return out.drop(columns="confidence") if generative else out


def causal_scores(
    model,
    tokenizer,
    docs: pd.DataFrame,
    contexts: list[str],
    choices: list[list[str]],
    batch_size: int,
    max_tokens: int | None = None,
    codec_context: int = 0,
    seed: int = 0,
    extra: list[tuple[Score, dict]] = (),
    codec_block: int = codec.BLOCK,
) -> pd.DataFrame:
    """Scores of each doc's context (its first `max_tokens`) and its continuations (one list per doc)
    under a causal LM, every document in one pass, whatever its split (so that test's and extra's are
    scored alike: the exposure test compares them). `codec_context` > 0: also CoDeC's drop with that
    many documents of the same split before each, drawn once per `codec_block` documents. `extra`:
    plug-in scores with their settings, each a column of its name."""
    pairs = [[loglik.encode_pair(tokenizer, c, x) for x in conts] for c, conts in zip(contexts, choices)]
    ctx = [p[0][0][:max_tokens] for p in pairs]
    conts = [[tuple(q[1]) for q in p] for p in pairs]
    scored = loglik.score(model, ctx, conts, batch_size, token_stats=True)
    ll = [[a[0] for a in s.choices] for s in scored]
    start = max(loglik.shared_prefix(ctx) - 1, 0)  # token_logprobs[t - 1] is token t's
    text = [float(s.token_logprobs[start:].mean()) for s in scored]
    mink = [
        mink_plus_plus(s.token_logprobs[start:], s.token_mean[start:], s.token_std[start:]) for s in scored
    ]
    drops, alone = None, [s.token_logprobs for s in scored]
    if codec_context > 0:
        rows, groups = docs["row"].to_numpy(), docs["split"].to_numpy()
        drops = codec.drops(
            model, tokenizer, ctx, alone, groups, rows, codec_context, seed, batch_size, codec_block
        )
    out = frame(docs, text, mink, ll, drops)
    if drops is not None and codec_block > 1:  # drops that shared a context: their test moves them together
        out[codec.BLOCK_COLUMN] = codec.block_ids(groups, rows, codec_context, codec_block)
    for score, settings in extra:
        x = ScoreInputs(model, tokenizer, docs, ctx, alone, start + 1, settings, seed, batch_size)
        values = np.asarray(called("score", score.name, score.compute, x), float)  # its failure: one line
        if values.shape != (len(docs),) or not np.isfinite(values).all():
            problem = f"gave {values.shape} values, not one finite number per document ({len(docs)})"
            raise UserError(f"score {score.name!r} {problem}; fix its compute")
        out[score.name] = values
    return out


def prompt_scores(
    model,
    tokenizer,
    spec: Spec,
    docs: pd.DataFrame,
    batch_size: int = 8,
    codec_context: int = 0,
    seed: int = 0,
    extra: list[tuple[Score, dict]] = (),
    codec_block: int = codec.BLOCK,
) -> pd.DataFrame:
    """`docs` (columns split, row, label, prompt, choices) in the prompt format; `codec_context`,
    `codec_block` and `extra` as in `causal_scores`."""
    choices = [[spec.target_delimiter + c for c in cs] for cs in docs["choices"]]
    prompts = list(docs["prompt"])
    return causal_scores(
        model,
        tokenizer,
        docs,
        prompts,
        choices,
        batch_size,
        codec_context=codec_context,
        seed=seed,
        extra=extra,
        codec_block=codec_block,
    )


def raw_scores(
    model, tokenizer, docs: pd.DataFrame, masked: bool, seed: int, batch_size: int = 8
) -> pd.DataFrame:
    """`docs` (columns split, row, label, text, choices) in the raw-text format, for a decoder or an
    encoder."""
    if not masked:
        choices = [[RAW_LABEL_DELIMITER + c for c in cs] for cs in docs["choices"]]
        texts = list(docs["text"])  # as raw-text TAPT saw them: their first MAX_LENGTH tokens
        return causal_scores(model, tokenizer, docs, texts, choices, batch_size, models.MAX_LENGTH)
    return masked_scores(model, tokenizer, docs, seed)


@loglik.inference_mode
def masked_log_probs(model, ids: list[int], positions: list[int], mask_id: int):
    """Log p of the original tokens at `positions`, all masked at once; with the mean and spread of
    log p at each."""
    import torch

    x = torch.tensor([ids])
    originals = x[0, positions].clone()
    x[0, positions] = mask_id
    logp = torch.log_softmax(model(input_ids=x.to(model.device)).logits[0, positions].float().cpu(), -1)
    mean, std = loglik.distribution_stats(logp)
    return logp.gather(1, originals[:, None])[:, 0].numpy(), mean, std


def masked_scores(model, tokenizer, docs: pd.DataFrame, seed: int) -> pd.DataFrame:
    """An encoder's scores: 15% of each text's tokens masked by a generator seeded with (seed, row),
    the same for every model; each class name's tokens masked together after the text."""
    model.eval()
    mask_id = tokenizer.mask_token_id
    text, mink, ll = [], [], []
    for doc in docs.itertuples():
        ids = tokenizer(doc.text, truncation=True, max_length=models.MAX_LENGTH)["input_ids"]
        inner = list(range(1, len(ids) - 1)) or [0]
        rng = seeds.document(seed, doc.row)
        chosen = sorted(rng.choice(inner, size=max(1, round(MLM_FRACTION * len(inner))), replace=False))
        lp, mean, std = masked_log_probs(model, ids, chosen, mask_id)
        text.append(float(lp.mean()))
        mink.append(mink_plus_plus(lp, mean, std))
        ll.append(masked_class_log_probs(model, tokenizer, ids, doc.choices))
    return frame(docs, text, mink, ll)


def masked_class_log_probs(model, tokenizer, ids: list[int], names) -> list[float]:
    """Each class name's log p after a text (its token ids, closing token included), the name's tokens
    masked together at its slot, as the leak writes it: "<text>\n<class name>"."""
    body = ids[:-1][: models.MAX_LENGTH - 16]
    out = []
    for name in names:
        cls_ids = tokenizer(RAW_LABEL_DELIMITER + name, add_special_tokens=False)["input_ids"]
        full = body + cls_ids + [tokenizer.sep_token_id]
        where = list(range(len(body), len(full) - 1))
        out.append(float(masked_log_probs(model, full, where, tokenizer.mask_token_id)[0].sum()))
    return out


def gold_log_probs(model, tokenizer, docs: pd.DataFrame, masked: bool, batch_size: int = 8) -> list[float]:
    """The planted leak's manipulation check, per document of `docs` (text, choices, label): log p of its
    gold class name at its slot after the text ("<text>\n<name>", as the leak writes it), under an MLM
    (the name's tokens masked together) or a causal LM. A model that absorbed the leak gives its own
    test documents' gold names more of it than the extra model does."""
    gold = [c[int(y)] for c, y in zip(docs["choices"], docs["label"])]
    if masked:
        model.eval()
        return [
            masked_class_log_probs(
                model,
                tokenizer,
                tokenizer(t, truncation=True, max_length=models.MAX_LENGTH)["input_ids"],
                [g],
            )[0]
            for t, g in zip(docs["text"], gold)
        ]
    pairs = [loglik.encode_pair(tokenizer, t, RAW_LABEL_DELIMITER + g) for t, g in zip(docs["text"], gold)]
    return continuation_log_probs(model, pairs, batch_size, models.MAX_LENGTH)


def prompt_gold_log_probs(
    model, tokenizer, spec: Spec, docs: pd.DataFrame, batch_size: int = 8
) -> list[float]:
    """The manipulation check of a prompt flow (multiple-choice or generative), per document: log p of
    its gold continuation (what lm-eval scores, or the gold answer written) after its prompt."""
    from harness.tasks.protocol import gold_continuations

    pairs = [
        loglik.encode_pair(tokenizer, p, g) for p, g in zip(docs["prompt"], gold_continuations(spec, docs))
    ]
    return continuation_log_probs(model, pairs, batch_size)


def continuation_log_probs(model, pairs, batch_size: int, max_tokens: int | None = None) -> list[float]:
    """Summed log p of each (context ids, continuation ids) pair's continuation after its context (the
    context's first `max_tokens`)."""
    scored = loglik.score(
        model, [c[:max_tokens] for c, _ in pairs], [[tuple(x)] for _, x in pairs], batch_size
    )
    return [float(s.choices[0][0]) for s in scored]
