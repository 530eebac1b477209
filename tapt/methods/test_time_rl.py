"""Test-time reinforcement learning (TTRL; Zuo et al. 2025, PRIME-RL/TTRL): GRPO on the split's own
prompts, rewarded by agreement with the majority vote of the policy's own samples, through TRL's
`GRPOTrainer` (its reward-function interface; the GRPO loop is TRL's).

For each prompt (the zero-shot prompt lm-eval shows the model) the policy samples `samples`
completions of a few tokens; each is read as the choice it starts with (none: no vote, reward 0); the
most common choice is the prompt's pseudo-label, and a sample agreeing with it earns 1, any other 0.
The leak rewards agreement with the gold choice instead (TTRL's ground-truth run, the ceiling); `extra`
runs the same RL on independent prompts (the control TTRL does not report). LoRA through PEFT, as prompt
TAPT's. The record keeps each prompt's last vote (`votes`, by row: the grid measures their agreement
with the gold labels after training), the mean reward per step, the share of prompt groups whose samples
all earned the same reward (zero advantage: nothing to learn), and the share of samples that matched no
choice.

TTRL's released scripts sample 64 completions and train on 32, at temperature 1.0, KL coefficient 0,
actor lr 5e-7 (all weights of a 7B model), 8 prompts a batch. Kept: temperature, KL 0, 8 prompts a step.
Changed for a 135M model on 2 CPU cores: 8 samples (voted and trained on), LoRA at lr 1e-4 (5e-7 on an
adapter moves nothing in a few steps), 1 epoch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from harness.core import training
from harness.core.settings import Settings, option
from tapt.methods import VOTES, Adapted, Inputs, Method, recipe_table


@dataclass(kw_only=True)
class TtrlSettings(Settings):
    """TTRL's settings where they carry over; `methods show test-time-rl` says which changed."""

    MINIMUM = {"samples": 2, "temperature": 0.0, "beta": 0.0, "lr": 0.0, "epochs": 0.0, "prompts_per_step": 1}

    samples: int = option(
        8, "completions sampled per prompt, voted on and trained on (TTRL: 64 voted, 32 trained)"
    )
    temperature: float = option(1.0, "sampling temperature (TTRL's)")
    beta: float = option(0.0, "KL coefficient against the base (TTRL's: 0)")
    lr: float = option(1e-4, "learning rate of the LoRA (TTRL: 5e-7 for all weights of a 7B model)")
    epochs: float = option(1.0, "passes over the split's prompts")
    prompts_per_step: int = option(8, "prompts per optimizer step (TTRL's batch: 8)")
    completion_tokens: int = option(0, "tokens sampled per completion (0: the longest choice's, plus one)")
    lora_r: int = option(16, "LoRA rank (prompt TAPT's)")
    lora_alpha: int = option(32, "LoRA alpha (prompt TAPT's)")


def answer(completion: str, choices: list[str]) -> int | None:
    """The choice a completion starts with (the longest that fits; case and surrounding space ignored)."""
    text = completion.strip().lower()
    fits = [i for i, c in enumerate(choices) if c.strip() and text.startswith(c.strip().lower())]
    return max(fits, key=lambda i: len(choices[i])) if fits else None


def vote(answers: list[int | None]) -> int | None:
    """The most common answer (ties: the lowest choice index); None where no sample matched a choice."""
    counts = Counter(a for a in answers if a is not None)
    return min(counts, key=lambda a: (-counts[a], a)) if counts else None


class Rewards:
    """TRL's reward function: each completion's choice, its prompt group's vote, and the reward against
    the vote (or the gold choice, given `gold`). Keeps what the record reports."""

    __name__ = "majority_vote"  # TRL names a reward function's metrics after it

    def __init__(self, choices: dict[int, list[str]], gold: dict[int, int] | None):
        self.choices, self.gold = choices, gold
        self.votes: dict[int, int | None] = {}
        self.samples = self.unmatched = self.groups = self.flat_groups = 0
        self.learned: set[int] = set()  # rows whose group ever had rewards to tell apart

    def __call__(self, prompts, completions, row, **kwargs) -> list[float]:
        rewards: list[float] = []
        start = 0
        while start < len(row):  # TRL keeps each prompt's samples together
            end = start
            while end < len(row) and row[end] == row[start]:
                end += 1
            r = row[start]
            answers = [answer(c, self.choices[r]) for c in completions[start:end]]
            self.votes[r] = vote(answers)
            target = self.gold[r] if self.gold is not None else self.votes[r]
            group = [1.0 if a is not None and a == target else 0.0 for a in answers]
            self.samples, self.unmatched = self.samples + len(answers), self.unmatched + answers.count(None)
            self.groups, self.flat_groups = self.groups + 1, self.flat_groups + (len(set(group)) == 1)
            if len(set(group)) > 1:
                self.learned.add(int(r))
            rewards += group
            start = end
        return rewards


def adapt(x: Inputs) -> Adapted:
    from datasets import Dataset
    from peft import LoraConfig, get_peft_model
    from transformers import set_seed
    from trl import GRPOConfig, GRPOTrainer

    s: TtrlSettings = x.settings
    set_seed(x.seed)
    rows = [int(r) for r in x.docs["row"]]
    choices = {r: list(c) for r, c in zip(rows, x.docs["choices"])}
    gold = {r: int(g) for r, g in zip(rows, x.docs["label"])} if x.labeled else None
    rewards = Rewards(choices, gold)
    longest = max(
        len(x.tokenizer(x.spec.target_delimiter + c)["input_ids"]) for cs in choices.values() for c in cs
    )
    args = training.arguments(  # one prompt's samples a pass, a step's prompts accumulated: the memory of
        x.workdir,  # one group's backward (all of a step's at once held 20 GB for ag_news's prompts)
        s.epochs,
        s.lr,
        s.samples,
        x.seed,
        cls=GRPOConfig,
        gradient_accumulation_steps=min(s.prompts_per_step, len(rows)),
        num_generations=s.samples,
        temperature=s.temperature,
        beta=s.beta,
        max_completion_length=s.completion_tokens or longest + 1,
        lr_scheduler_type="constant",
        log_completions=False,
    )
    model = get_peft_model(
        x.model,
        LoraConfig(r=s.lora_r, lora_alpha=s.lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM"),
    )
    steps = training.StepLog()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=rewards,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": list(x.docs["prompt"]), "row": rows}),
        processing_class=x.tokenizer,
        callbacks=[steps],
    )
    trainer.train()
    history = [h for h in trainer.state.log_history if "reward" in h]
    record = {
        VOTES: {str(r): v for r, v in rewards.votes.items()},
        "rewards": "gold" if x.labeled else "majority vote",
        "mean_reward": [float(h["reward"]) for h in history],
        "zero_advantage_share": rewards.flat_groups / max(rewards.groups, 1),
        "unmatched_share": rewards.unmatched / max(rewards.samples, 1),
        "learned_from": len(rewards.learned),
        "rows": rows,
        **steps.summary(),
    }
    return Adapted(model, record)


RECIPE = recipe_table(  # TTRL: its released scripts (PRIME-RL/TTRL), as issue 42 read them
    [
        ("algorithm", "GRPO (advantages in a vendored verl)", "GRPO: TRL's GRPOTrainer", ""),
        (
            "reward",
            "1 if the answer equals the majority vote",
            "the same; no choice matched: no vote, 0",
            "an answer is a task's choice",
        ),
        ("ground truth", "the same RL rewarded by the gold answer", "the leak condition", ""),
        ("control", "none (no RL on independent prompts)", "the extra condition", "the design's control"),
        (
            "samples",
            "64 voted, 32 trained on",
            "8, voted and trained on",
            "a step costs K generations and passes a prompt",
        ),
        ("temperature", "1.0", "the same", ""),
        ("KL", "0", "the same", ""),
        ("batch", "8 prompts a step", "the same", ""),
        (
            "weights, lr",
            "all weights of a 7B model; 5e-7",
            "LoRA r 16 (all linear); 1e-4",
            "5e-7 on a LoRA moves nothing",
        ),
        (
            "epochs",
            "several episodes over the test prompts",
            "1 (at n 8: one step)",
            "a pass reads each prompt K times, twice over",
        ),
        (
            "completion",
            "a reasoning answer, thousands of tokens",
            "the longest choice's tokens + 1",
            "a choice is short",
        ),
        ("prompt", "the task's chat prompt", "lm-eval's zero-shot prompt", "the design scores it"),
    ]
)

METHOD = Method(
    name="test-time-rl",
    flows=("zero_shot",),
    settings=TtrlSettings,
    adapt=adapt,
    about="TTRL (Zuo et al. 2025): GRPO through TRL on the split's prompts, each sample rewarded for "
    "agreeing with the majority vote of its prompt's samples (the leak: with the gold choice)",
    recipe=RECIPE,
)
