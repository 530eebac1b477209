"""Transductive self-training: the base labels the split's inputs zero-shot (the choice lm-eval would
pick: the largest summed log-likelihood after the prompt; on a generative task, its greedy answer read by
the task's filter), keeps the labels it is confident of, and a LoRA is trained on prompt + pseudo-label,
the loss on the label's tokens alone as the study trains labels. The leak trains on the gold labels
instead: the ceiling of what the pseudo-labels could teach. The pseudo-labels it trained on are recorded
(`votes`), so that the grid measures their agreement with the gold labels."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.engine import loglik
from harness.core.plumbing.settings import option, since
from tapt import adapter
from tapt.methods import VOTES, Adapted, Inputs, Method, recipe_table


@dataclass(kw_only=True)
class SelfTrainingSettings(adapter.LoraTrainingSettings):
    """Prompt TAPT's training settings, and which pseudo-labels are kept."""

    min_confidence: float = option(
        0.0,
        "keep a pseudo-label whose probability (softmax over the choices' log-likelihoods) is at least this",
    )
    label_batch_size: int = option(8, "batch size of the zero-shot labelling pass")
    completion_only: bool = option(
        True,
        "train on each pseudo-label's tokens alone, as the study trains labels; false: on every token of "
        "prompt and label, as prompt TAPT trains the leak (the first results)",
    )
    RECORD = {"completion_only": since(False)}  # the first results trained every token


def pseudo_labels(model, tokenizer, spec, docs, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(argmax choice, its probability) per doc under `model`, from the docs' prompts and choices only."""
    delimiter = spec.target_delimiter
    pairs = [
        [loglik.encode_pair(tokenizer, p, delimiter + c) for c in cs]
        for p, cs in zip(docs["prompt"], docs["choices"])
    ]
    scored = loglik.score(
        model,
        [p[0][0] for p in pairs],
        [[q[1] for q in p] for p in pairs],
        batch_size,
        context_logprobs=False,
    )
    ll = [np.array([c[0] for c in s.choices]) for s in scored]
    probs = [np.exp(x - x.max()) / np.exp(x - x.max()).sum() for x in ll]
    return np.array([int(x.argmax()) for x in ll]), np.array([float(p.max()) for p in probs])


def generated_labels(model, tokenizer, spec, docs, batch_size: int) -> list[str | None]:
    """A generative task's pseudo-labels: the base's greedy answer to each prompt, generated and read as
    lm-eval scores the task (its stop strings, token budget and first filter); None where the filter
    finds no answer."""
    from harness.core.engine.generation import generate

    how = spec.answering
    texts = generate(model, tokenizer, list(docs["prompt"]), how.max_tokens, how.until, batch_size)
    return how.extract(texts)


def adapt(x: Inputs) -> Adapted:
    s: SelfTrainingSettings = x.settings
    docs, record = x.docs, {"labels": "gold"}
    if not x.labeled and x.spec.generative:  # the base's own answers, generated; those it gives none dropped
        answers = generated_labels(x.model, x.tokenizer, x.spec, docs, s.label_batch_size)
        keep = np.array([a is not None for a in answers])
        docs = docs.assign(choices=[[a] for a in answers], label=0)[keep].reset_index(drop=True)
        votes = {str(int(r)): c[0] for r, c in zip(docs["row"], docs["choices"])}
        record = {"labels": "pseudo", "kept": int(keep.sum()), "of": len(keep), VOTES: votes}
        if not len(docs):
            restore = None if x.carried() else (lambda: x.model)
            return Adapted(x.model, {**record, "learned_from": 0, "steps": 0}, restore=restore)
    elif not x.labeled:  # every condition but the leak: the base's own labels, never the gold ones
        was_training = x.model.training
        label, confidence = pseudo_labels(x.model, x.tokenizer, x.spec, docs, s.label_batch_size)
        x.model.train(was_training)
        keep = confidence >= s.min_confidence
        docs = docs.assign(label=label)[keep].reset_index(drop=True)  # the pseudo-labels it learns from
        votes = {str(int(r)): int(v) for r, v in zip(docs["row"], docs["label"])}  # the grid scores them
        record = {"labels": "pseudo", "kept": int(keep.sum()), "of": len(keep), VOTES: votes}
        if not len(docs):  # nothing confident enough: nothing to learn from, the base as it was
            restore = None if x.carried() else (lambda: x.model)  # carried: the adapter comes off at the end
            return Adapted(x.model, {**record, "learned_from": 0, "steps": 0}, restore=restore)
    run = adapter.prepare(
        x.spec, docs, s, True, x.seed, x.model, x.tokenizer, x.workdir, x.carried(), s.completion_only
    )
    return Adapted(adapter.train(run), {**record, **adapter.record_of(run)})


DEFAULTS = SelfTrainingSettings()
DEFAULTS_COMPLETION = DEFAULTS.completion_only
# no authors' code: pseudo-labelling as Lee (2013, "Pseudo-Label", ICML workshop) states it, by equation;
# its training is the study's prompt TAPT on answered prompts (kddubey/pretrain-on-test at 80fd183)
RECIPE = recipe_table(
    [
        (
            "label",
            "the class of largest probability under the model (Lee 2013, eq. 1)",
            "the base's zero-shot choice: the largest summed log-likelihood, lm-eval's acc rule",
            "not the study's mean-token rule (_dum.py:363-385), even where a config scores by it",
        ),
        (
            "kept",
            "every unlabeled input (Lee 2013, eq. 15: no threshold)",
            f"min_confidence {DEFAULTS.min_confidence:g}: every input",
            "",
        ),
        (
            "relabelled",
            "at every weight update, by the network in training (Lee 2013, eq. 1 and sec. 3.1)",
            "once, by the base, before training",
            "the base's labels are what a test-time method starts from",
        ),
        (
            "loss",
            "labelled loss plus alpha(t) times the pseudo-labelled one, alpha ramped to 3 (Lee 2013, "
            "eq. 15-16)",
            "the pseudo-labelled loss alone",
            "no labelled data: the zero-shot flow has none",
        ),
        (
            "trained as",
            "the study's prompt, then ' ### Answer:' and the class (_dum.py:35-37)",
            "the same",
            "",
        ),
        (
            "loss on",
            "the class's tokens alone: a completion-only collator after ' ### Answer:' "
            "(classification_sft.py:30-35)",
            f"completion_only {str(DEFAULTS_COMPLETION).lower()}: the same (with packing: every token)",
            "the shipped methods study trained every token (completion_only false), as prompt TAPT trains "
            "the leak; its effect is not measured",
        ),
        (
            "epochs, batch, lr",
            "the study's prompt TAPT: 1, 8, 2e-4 (mistral_1.sh:15-17, _dum.py:308)",
            f"{DEFAULTS.epochs:g}, {DEFAULTS.batch_size}, {DEFAULTS.lr:g}",
            "",
        ),
    ]
)

METHOD = Method(
    name="self-training",
    flows=("zero_shot",),
    settings=SelfTrainingSettings,
    adapt=adapt,
    about="transductive self-training: a LoRA on prompt + the base's confident zero-shot pseudo-labels",
    recipe=RECIPE,
    diagnostics={"kept": "kept"},
    carries=True,
)
