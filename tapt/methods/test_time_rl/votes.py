"""How test-time RL reads its samples: the choice a completion names, a group's majority vote, the
rewards against it (TRL's reward-function interface), and each prompt's choices as the tokens its
trainer may sample (tapt.methods.test_time_rl)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Hashable


def answer(completion: str, choices: list[str], last: bool = False) -> int | None:
    """The first choice a completion names (the last, where `last`: TTRL's rule), as a whole word anywhere
    in it (case ignored; where two start, or for the last end, at the same place: the longer); None where
    it names none. TTRL reads its answer from the whole completion too."""
    found = []
    for i, choice in enumerate(choices):
        word = choice.strip()
        if word:
            hits = list(re.finditer(rf"(?<!\w){re.escape(word)}(?!\w)", completion, flags=re.IGNORECASE))
            if hits:
                at = -hits[-1].end() if last else hits[0].start()  # the last: the latest to end
                found.append((at, -len(word), i))
    return min(found)[2] if found else None


def counted(answers: list[int | None], non_answers_vote: bool = False) -> Counter:
    """The votes: each answer's count, in the order first sampled; 'no answer' (None) among them only with
    `non_answers_vote`, as TTRL counts it."""
    return Counter(a for a in answers if non_answers_vote or a is not None)


def vote(answers: list[int | None], non_answers_vote: bool = False) -> int | None:
    """The most common answer; a tie goes to the answer sampled first (TTRL's `Counter.most_common`), so
    no class is favoured; None where no sample named a choice (with `non_answers_vote`: None also where
    'no answer' is the most common)."""
    counts = counted(answers, non_answers_vote)
    return counts.most_common(1)[0][0] if counts else None


def tied(answers: list[int | None], non_answers_vote: bool = False) -> bool:
    """Whether the vote was a tie between two or more answers."""
    top = counted(answers, non_answers_vote).most_common(2)
    return len(top) == 2 and top[0][1] == top[1][1]


class Rewards:
    """TRL's reward function: each completion's answer (the choice it names; a generative task's, given
    `read`: its extracted answer), its prompt group's vote, and the reward against the vote (or the gold
    answer, given `gold`). Keeps what the record reports."""

    __name__ = "majority_vote"  # TRL names a reward function's metrics after it

    def __init__(
        self,
        choices: dict[int, list[str]] | None,
        gold: dict | None,
        last: bool = False,
        non_answers_vote: bool = False,
        read: Callable[[str, int], Hashable | None] | None = None,
        same: Callable[[Hashable, Hashable], bool] | None = None,
    ):
        self.choices, self.gold = choices, gold
        self.same = same or (lambda a, b: a == b)  # a generative task's: the answers' equivalence
        self.last, self.non_answers_vote = last, non_answers_vote  # TTRL's two rules (free text)
        self.read = read or (lambda completion, r: answer(completion, self.choices[r], self.last))
        self.votes: dict[int, int | None] = {}
        self.samples = self.unmatched = self.groups = self.flat_groups = self.ties = 0
        self.learned: set[int] = set()  # rows whose group ever had rewards to tell apart
        self.sampled: dict[int, list] = {}  # each row's answers when it was last voted on

    def __call__(self, prompts, completions, row, **kwargs) -> list[float]:
        rewards: list[float] = []
        start = 0
        while start < len(row):  # TRL keeps each prompt's samples together
            end = start
            while end < len(row) and row[end] == row[start]:
                end += 1
            r = row[start]
            answers = [self.read(c, r) for c in completions[start:end]]
            self.votes[r] = vote(answers, self.non_answers_vote)
            target = self.gold[r] if self.gold is not None else self.votes[r]
            counts = self.non_answers_vote and self.gold is None  # 'no answer' won: those samples agree
            group = [1.0 if (a is not None or counts) and self.same(a, target) else 0.0 for a in answers]
            self.sampled[r] = answers
            self.samples, self.unmatched = self.samples + len(answers), self.unmatched + answers.count(None)
            self.groups, self.flat_groups = self.groups + 1, self.flat_groups + (len(set(group)) == 1)
            self.ties += tied(answers, self.non_answers_vote)
            if len(set(group)) > 1:
                self.learned.add(int(r))
            rewards += group
            start = end
        return rewards


def choice_tokens(tokenizer, prompts: list[str], choices: list[list[str]], delimiter: str) -> dict:
    """Each prompt's token ids (as TRL tokenizes a text prompt) -> its choices' tokens as a continuation
    of it (as lm-eval scores them: the tokens the whole text adds to the prompt's)."""
    out = {}
    for prompt, names in zip(prompts, choices):
        ids = tokenizer(text=prompt)["input_ids"]
        conts = []
        for name in names:
            whole = tokenizer(text=prompt + delimiter + name)["input_ids"]
            alone = tokenizer(text=delimiter + name, add_special_tokens=False)["input_ids"]
            conts.append(whole[len(ids) :] if whole[: len(ids)] == ids else alone)
        out[tuple(ids)] = conts
    return out


def generated_reader(answering, rule: str) -> Callable[[str, int], str | None]:
    """A generative task's answer of a completion: cut at the task's stop strings, then read by TTRL's
    math rule (`math`: the last \\boxed{}, else the last number) or by the task's own first filter
    (`task`), as lm-eval reads the answer it scores."""
    from harness.tasks.generative import math_answer

    if rule == "math":
        return lambda completion, r: math_answer(answering.cut(completion))
    return lambda completion, r: answering.extract([completion])[0]
