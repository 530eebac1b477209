"""Which tasks a confirmatory zero-shot plan reads, decided before any unit by a rule fixed in the code: a
task enters only where the base beats chance on the train and extra documents of the plan's units
(never test's). A base below chance on a task (one that answers a rare class to nearly every question,
say) cannot show a bias there: its extra and test models agree for want of an answer, not for want of
a bias.

The base scores every train and extra document of the task's planned subsamples once, each read with the
plan's rule (`accuracy`); the task enters where a one-sided binomial test of those answers against
chance (1 / the classes; a generative task's: the share of its most common gold answer) gives
p <= ALPHA. The result is written before the first unit (results.
screen_path), so a resumed run reads the same screen, and the summary names the tasks left out."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from harness import results
from harness.core.design.power import ALPHA
from harness.core.engine import loglik
from harness.core.plumbing.errors import UserError
from harness.grid.configuration.config import GridConfig
from harness.grid.unit.base_model import LOADED, loaded_base
from harness.tasks.protocol import Spec, find_spec, subsample_docs

log = logging.getLogger("tapt_bench.grid")
RULE = "base beats chance on the train and extra documents of the planned units (binomial, one-sided)"


@dataclass(frozen=True)
class Screened:
    """One task's screen: the base's right answers among its train and extra documents, and chance."""

    task: str
    documents: int
    correct: int
    chance: float
    p: float
    entered: bool
    # the classifier flow's head-learns rule (None elsewhere): the pilot units whose base head's final
    # training loss is below LEARNS x ln K, and whose base beats the test subsample's majority share
    units: int | None = None
    head_learned: int | None = None
    above_majority: int | None = None
    loss_over_ln_k: float | None = None  # the median of final loss / ln K

    def line(self) -> str:
        share = self.correct / self.documents if self.documents else float("nan")
        word = "enters" if self.entered else "left out"
        said = (
            f"{self.task}: {word}: the base answers {share:.1%} of {self.documents} train and extra "
            f"documents against chance {self.chance:.1%} (binomial p {self.p:.3g}, one-sided)"
        )
        if self.units is not None:
            said += (
                f"; its head's final loss {self.loss_over_ln_k:.2f} x ln K (median), below {LEARNS:g} x ln K "
                f"in {self.head_learned} of {self.units} units, base above the test majority share in "
                f"{self.above_majority}"
            )
        return said


# the classifier flow's head learns where its final training loss is below this share of ln K (the loss of a
# uniform guess over K classes): fixed before any bias is read
LEARNS = 0.6


def answers(model, tokenizer, spec: Spec, docs: pd.DataFrame, rule: str, batch_size: int) -> np.ndarray:
    """Whether the base's choice is the gold one, per document, by `rule` (acc: the largest summed
    log-likelihood; mean_token: the largest mean per token), as the zero-shot flow reads test; a
    generative task's: whether its greedy answer, read by the task's filter, is the gold one."""
    if spec.generative:
        from harness.core.engine.generation import generate

        how = spec.answering
        texts = generate(model, tokenizer, list(docs["prompt"]), how.max_tokens, how.until, batch_size)
        gold = [str(c[0]).strip() for c in docs["choices"]]
        return np.array([a is not None and a == g for a, g in zip(how.extract(texts), gold)])
    pairs = [
        [loglik.encode_pair(tokenizer, p, spec.target_delimiter + c) for c in cs]
        for p, cs in zip(docs["prompt"], docs["choices"])
    ]
    contexts = [p[0][0] for p in pairs]
    continuations = [[tuple(q[1]) for q in p] for p in pairs]
    scored = loglik.score(model, contexts, continuations, batch_size, context_logprobs=False)
    correct = []
    for s, conts, y in zip(scored, continuations, docs["label"]):
        ll = np.array([c[0] for c in s.choices])
        if rule == "mean_token":
            ll = ll / np.array([len(c) for c in conts])
        correct.append(int(ll.argmax()) == int(y))
    return np.array(correct)


def screen_task(cfg: GridConfig, slug: str) -> Screened:
    from scipy import stats

    spec = find_spec(slug, cfg.sample.include_path)
    parts = []
    for k in range(cfg.grid.subsamples):
        docs = subsample_docs(spec, cfg.sample, k)
        parts += [docs["train"], docs["extra"]]
    docs = pd.concat(parts).drop_duplicates("row")
    base = loaded_base(cfg.model, cfg.form)
    correct = answers(base.model, base.tokenizer, spec, docs, cfg.grid.accuracy, cfg.grid.eval_batch_size)
    if spec.generative:  # chance: always answering the most common gold answer
        chance = float(docs["choices"].map(lambda c: str(c[0])).value_counts().iloc[0] / len(docs))
    else:
        chance = float(np.mean([1 / len(c) for c in docs["choices"]]))
    p = float(stats.binomtest(int(correct.sum()), len(correct), chance, alternative="greater").pvalue)
    return Screened(slug, len(correct), int(correct.sum()), chance, p, p <= ALPHA)


def screened(cfg: GridConfig, say=print) -> GridConfig:
    """The config with the tasks its base does not beat chance on left out, each cell's screen written
    to (or, on a resumed run, read from) results.screen_path; refused where no task enters."""
    tasks, kept = cfg.slugs, set(cfg.slugs)
    for cell in {(c.sample.m, c.sample.n): c for c in cfg.run_configs()}.values():
        path = results.screen_path(cell.grid.out, cell.sample.m, cell.sample.n, cell.model.base)
        if path.is_file():
            found = [Screened(**s) for s in json.loads(path.read_text())["tasks"]]
        else:
            found = [screen_task(cell, slug) for slug in tasks]
            results.write_json(
                path, {"rule": RULE, "base": cell.model.base, "tasks": [asdict(s) for s in found]}
            )
        if {s.task for s in found} != set(tasks):
            raise UserError(f"{path} screens other tasks than the plan's {tasks}: delete it to screen again")
        for s in found:
            say(f"screen (m {cell.sample.m}, n {cell.sample.n}): {s.line()}")
        kept &= {s.task for s in found if s.entered}
    LOADED.forget()  # the units load their own base (in a worker, or here again)
    if not kept:
        raise UserError("no task passed the screen (the base beats chance on none): the plan reads nothing")
    return cfg if kept == set(tasks) else cfg.replace(tasks=[t for t in tasks if t in kept])
