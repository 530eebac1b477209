"""Test-time reinforcement learning (TTRL; Zuo et al. 2025, PRIME-RL/TTRL): GRPO on the split's own
prompts, rewarded by agreement with the majority vote of the policy's own samples, through TRL's
`GRPOTrainer` (its reward-function interface; the GRPO loop is TRL's), reading each prompt once per group
of samples (`tapt.methods.test_time_rl.grpo_groups`).

For each prompt (the zero-shot prompt lm-eval shows the model) the policy samples `samples`
completions. By default (`answers: choices`) each is one of the prompt's choices: the policy's
next-token distribution renormalised over the tokens that stay on a choice, then the end. With `answers:
free` a completion is free text of a few tokens, read as the first choice it names anywhere in it (no
choice named: no vote, reward 0). The most common choice is the prompt's pseudo-label (a tie goes to the
choice sampled first, as TTRL's `Counter.most_common`), and a sample agreeing with it earns 1, any other
0. The leak rewards agreement with the gold choice instead (TTRL's ground-truth run, the ceiling);
`extra` runs the same RL on independent prompts (the control TTRL does not report). LoRA through PEFT,
as prompt TAPT's. The record keeps each prompt's last vote (`votes`, by row: the grid measures their
agreement with the gold labels after training), the mean reward per rollout, the share of prompt groups
whose samples all earned the same reward (zero advantage: nothing to learn), the share of samples that
named no choice, and the share of votes decided by a tie.

Each rollout samples `prompts_per_rollout` prompts' groups at once, then takes one clipped optimizer
step per `prompts_per_update` prompts' worth of its completions (TTRL: 8 prompts, 8 steps), with a KL
loss against the base at 0.001 and a cosine schedule after 3% warm-up. `tapt-bench methods show
test-time-rl` prints every point against the authors' scripts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from harness.core.plumbing.errors import UserError
from harness.core.plumbing.settings import Settings, option, since
from harness.tasks.generative import equivalent
from tapt.methods import GREEDY, SAMPLED, VOTES, Adapted, Inputs, Method
from tapt.methods.test_time_rl.recipe import RECIPE
from tapt.methods.test_time_rl.votes import Rewards, choice_tokens, generated_reader

CLIP = 0.2  # GRPO's ratio clip, TRL's epsilon and the authors' clip_ratio


@dataclass(kw_only=True)
class TtrlSettings(Settings):
    """TTRL's settings where they carry over; `methods show test-time-rl` says which changed."""

    MINIMUM = {
        "samples": 2,
        "beta": 0.0,
        "prompts_per_rollout": 1,
        "prompts_per_update": 1,
        "warmup_ratio": 0.0,
        "completion_tokens": 0,
        "weight_decay": 0.0,
        "dual_clip": 0.0,
        "lora_r": 1,
        "lora_alpha": 1,
    }
    ABOVE = {"temperature": 0.0, "lr": 0.0, "epochs": 0.0}
    BELOW = {"warmup_ratio": 1.0}
    RECORD = {  # the first results sampled free text, and ran without the authors' three training rules
        "extract": since("math"),  # a multiple-choice task's units never read it
        "answers": since("free"),
        "free_answer": since("first"),
        "non_answers_vote": since(False),
        "weight_decay": since(0.0),
        "dual_clip": since(0.0),
        "kl_ratio_weighted": since(True),
    }

    answers: Literal["choices", "free"] = option(
        "choices",
        "a multiple-choice task's: choices: each sample is one of the prompt's choices, drawn from the "
        "policy renormalised over the tokens that stay on one, then ended; free: free text, read for the "
        "first choice it names. A generative task's samples are always free text, read by `extract`",
    )
    extract: Literal["math", "task"] = option(
        "math",
        "a generative task's answer of a sample (cut at the task's stop strings): math, the authors' rule "
        "(the last \\boxed{}, else the last number); task, the task's own first filter, as lm-eval scores it",
    )

    free_answer: Literal["first", "last"] = option(
        "first", "free: which choice a completion names counts, the first or the last (the authors': last)"
    )
    non_answers_vote: bool = option(
        False,
        "free: a sample that names no choice votes for 'no answer', and where that wins, the samples that "
        "name none are rewarded (the authors'); off: no vote, reward 0",
    )
    samples: int = option(
        8, "completions sampled per prompt, voted on and trained on (TTRL: 64 voted, 32 trained)"
    )
    temperature: float = option(1.0, "sampling temperature (TTRL's)")
    beta: float = option(0.001, "KL loss coefficient against the base (TTRL's: verl's kl_loss_coef)")
    lr: float = option(1e-4, "learning rate of the LoRA (TTRL: 5e-7 for all weights of a 1.5B model)")
    epochs: float = option(1.0, "passes over the split's prompts")
    prompts_per_rollout: int = option(8, "prompts sampled together before the updates (TTRL's batch: 8)")
    prompts_per_update: int = option(1, "prompts' completions per optimizer step (TTRL's mini-batch: 1)")
    warmup_ratio: float = option(0.03, "linear warm-up share of the steps, then cosine decay (TTRL's)")
    completion_tokens: int = option(
        0,
        "tokens sampled per completion (0: the longest choice's, plus one; a generative task's: its "
        "max_gen_toks)",
    )
    weight_decay: float = option(0.0, "AdamW's weight decay (TRL's 0; the authors': 0.01)")
    dual_clip: float = option(
        0.0,
        "a negative advantage's loss capped at this many times it (verl's clip_ratio_c, through TRL's "
        "two-sided clipping `delta`; the authors': 3); 0: no cap, TRL's GRPO",
    )
    kl_ratio_weighted: bool = option(
        True,
        "TRL's KL term: the k3 estimate times the policy's ratio to the sampling policy "
        "(use_bias_correction_kl); false: k3 alone, as the authors' low_var_kl (which also clamps it)",
    )
    lora_r: int = option(16, "LoRA rank (prompt TAPT's)")
    lora_alpha: int = option(32, "LoRA alpha (prompt TAPT's)")

    def check(self) -> None:
        super().check()
        if 0 < self.dual_clip <= 1 + CLIP:
            raise UserError(
                f"test-time-rl: dual_clip {self.dual_clip} caps a loss the clipped ratio (at most "
                f"{1 + CLIP}) already bounds; set it above {1 + CLIP} (the authors': 3), or 0 for none"
            )
        if self.prompts_per_rollout % self.prompts_per_update:
            raise UserError(
                f"test-time-rl: prompts_per_rollout ({self.prompts_per_rollout}) must be a multiple of "
                f"prompts_per_update ({self.prompts_per_update}): each rollout ends on a whole update"
            )


def rollout_size(s: TtrlSettings, n: int) -> int:
    """Prompts per rollout for a split of n prompts: TRL's sampler drops a last, partial rollout, so a
    split it does not divide is refused rather than trained on in part."""
    size = min(s.prompts_per_rollout, n)
    if n % size or size % s.prompts_per_update:
        fits = [d for d in range(1, n + 1) if n % d == 0 and d % s.prompts_per_update == 0]
        raise UserError(
            f"test-time-rl: a split of {n} prompts is not a whole number of rollouts of "
            f"prompts_per_rollout {s.prompts_per_rollout} (TRL would leave {n % size} prompts out); set "
            f"prompts_per_rollout to one of {fits} in the method's settings"
        )
    return size


def reference_of(model) -> dict:
    """The KL reference adapter TRL added on an earlier chunk, taken off (TRL adds its own, which this
    copies back over): {parameter name: its weights}."""
    if "ref" not in getattr(model, "peft_config", {}):
        return {}
    kept = {n: p.detach().clone() for n, p in model.named_parameters() if ".ref." in n}
    model.delete_adapter("ref")
    return kept


def grpo_arguments(x: Inputs, rollout: int, longest: int):
    from harness.core.engine import training  # torch and the trainers load as a unit runs

    """TRL's GRPOConfig for the split: one rollout of `rollout` prompts, then rollout/update steps. A pass
    holds one prompt's samples (all of a rollout's at once held 20 GB for ag_news's prompts); an update
    accumulates prompts_per_update of them."""
    from trl import GRPOConfig

    s: TtrlSettings = x.settings
    return training.arguments(
        x.workdir,
        s.epochs,
        s.lr,
        s.samples,
        x.seed,
        cls=GRPOConfig,
        gradient_accumulation_steps=min(s.prompts_per_update, rollout),
        steps_per_generation=rollout,
        num_generations=s.samples,
        temperature=s.temperature,
        beta=s.beta,
        max_completion_length=s.completion_tokens or longest + 1,
        lr_scheduler_type="cosine",
        warmup_steps=s.warmup_ratio,  # transformers 5: a float below 1 is a share of the steps
        log_completions=False,
        epsilon=CLIP,
        weight_decay=s.weight_decay,
        delta=s.dual_clip or None,
        use_bias_correction_kl=s.kl_ratio_weighted,
    )


def adapt(x: Inputs, trainer_class=None) -> Adapted:
    """Train a LoRA by GRPO on the split's prompts. `trainer_class`: TRL's `GRPOTrainer` to time it
    against (the default reads each prompt once per group: `tapt.methods.test_time_rl.grpo_groups`)."""
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import set_seed

    from harness.core.engine import training
    from tapt.methods.test_time_rl.grpo_groups import GroupedGRPOTrainer

    s: TtrlSettings = x.settings
    set_seed(x.seed)
    rows = [int(r) for r in x.docs["row"]]
    if x.spec.generative:  # free text, read as the authors read it; the gold answer only for the leak
        how = x.spec.answering
        gold = {r: str(c[0]).strip() for r, c in zip(rows, x.docs["choices"])} if x.labeled else None
        read = generated_reader(how, s.extract)
        rewards = Rewards(None, gold, non_answers_vote=s.non_answers_vote, read=read, same=equivalent)
        longest = how.max_tokens - 1  # the completion's budget: the task's max_gen_toks
        # the premise, read before any step: the base's own greedy answer to each prompt, by the same rule
        greedy = dict(zip(rows, greedy_answers(x, read, rows)))
    else:
        choices = {r: list(c) for r, c in zip(rows, x.docs["choices"])}
        gold = {r: int(g) for r, g in zip(rows, x.docs["label"])} if x.labeled else None
        rewards = Rewards(choices, gold, last=s.free_answer == "last", non_answers_vote=s.non_answers_vote)
        longest = max(
            len(x.tokenizer(x.spec.target_delimiter + c)["input_ids"]) for cs in choices.values() for c in cs
        )
        greedy = dict(zip(rows, choice_greedy_answers(x, rewards, choices, longest)))  # the premise, too
    model = x.lora(
        LoraConfig(r=s.lora_r, lora_alpha=s.lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM")
    )
    steps = training.StepLog("lower test-time-rl's lr in its method settings")
    # TRL copies the adapter as its KL reference ("ref"): on a stream's later chunk the first chunk's copy
    # (the base's equal) stays the reference, as TTRL's reference is the initial model throughout
    reference = reference_of(model) if x.carried() else None
    trainer = (trainer_class or GroupedGRPOTrainer)(
        model=model,
        reward_funcs=rewards,
        args=grpo_arguments(x, rollout_size(s, len(rows)), longest),
        train_dataset=Dataset.from_dict({"prompt": list(x.docs["prompt"]), "row": rows}),
        processing_class=x.tokenizer,
        callbacks=[steps],
    )
    if reference:
        restore_reference(model, reference)
    if x.spec.generative:
        trainer.stop_strings = how.until  # as lm-eval generates the task's answers
    elif s.answers == "choices":
        if not isinstance(trainer, GroupedGRPOTrainer):
            why = f"samples through GroupedGRPOTrainer, not {type(trainer).__name__}"
            raise UserError(f"test-time-rl: answers: choices {why}; set answers: free")
        trainer.answers = choice_tokens(
            x.tokenizer, list(x.docs["prompt"]), [choices[r] for r in rows], x.spec.target_delimiter
        )
    trainer.train()
    record = record_of(x, rewards, trainer, rows, steps)
    record[GREEDY] = {str(r): a for r, a in greedy.items()}
    return Adapted(model, record)


def greedy_answers(x: Inputs, read, rows: list[int]) -> list:
    """The base's greedy answer to each of the split's prompts, read as the samples are (TTRL's premise:
    the vote of the samples is right more often than this one answer)."""
    from harness.core.engine.generation import generate

    how = x.spec.answering
    texts = generate(x.model, x.tokenizer, list(x.docs["prompt"]), how.max_tokens, how.until, 8)
    return [read(t, r) for t, r in zip(texts, rows)]


def choice_greedy_answers(x: Inputs, rewards: Rewards, choices: dict[int, list[str]], longest: int) -> list:
    """A multiple-choice task's premise: the base's greedy completion of each prompt, kept on its choices'
    tokens where the samples are (`answers: choices`), read by the rule the samples are read by."""
    from harness.core.engine.generation import generate
    from tapt.methods.test_time_rl.grpo_groups import on_answers

    prompts, rows = list(x.docs["prompt"]), [int(r) for r in x.docs["row"]]
    if x.settings.answers == "free":
        texts = generate(x.model, x.tokenizer, prompts, longest)
    else:  # one prompt a call: each keeps to its own choices from its own first new token
        table = choice_tokens(x.tokenizer, prompts, [choices[r] for r in rows], x.spec.target_delimiter)
        texts = []
        for prompt in prompts:
            ids = x.tokenizer(text=prompt)["input_ids"]
            keep = on_answers([table[tuple(ids)]], len(ids), x.tokenizer.eos_token_id)
            texts += generate(x.model, x.tokenizer, [prompt], longest, batch_size=1, allowed=keep)
    return [rewards.read(t, r) for t, r in zip(texts, rows)]


def restore_reference(model, reference: dict) -> None:
    """The adapter's weights set back to the reference's (the chunk before's), after TRL copied them."""
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if name in reference:
                param.copy_(reference[name])


def record_of(x: Inputs, rewards: Rewards, trainer, rows: list[int], steps) -> dict:
    """The run's record: the votes, the rewards' shares and each logged mean reward."""
    history = [h for h in trainer.state.log_history if "reward" in h]
    return {
        VOTES: {str(r): v for r, v in rewards.votes.items()},
        SAMPLED: {str(r): a for r, a in rewards.sampled.items()},
        "rewards": "gold" if x.labeled else "majority vote",
        "mean_reward": [float(h["reward"]) for h in history],
        "zero_advantage_share": rewards.flat_groups / max(rewards.groups, 1),
        "unmatched_share": rewards.unmatched / max(rewards.samples, 1),
        "tie_share": rewards.ties / max(rewards.groups, 1),
        "learned_from": len(rewards.learned),
        "rows": rows,
        **steps.summary(),
    }


def check_task(s: TtrlSettings, spec) -> str | None:
    """A generative task's samples are free text read by `extract`: the multiple-choice keys go unread."""
    if not spec.generative:
        return None
    unread = ["answers: free"] if s.answers == "free" else []
    unread += [f"free_answer: {s.free_answer}"] if s.free_answer != "first" else []
    if unread:
        return (
            f"{', '.join(unread)} set(s) how a multiple-choice task's samples are read, and this task is "
            "generative (its samples are free text, read by `extract`): drop them"
        )
    return None


METHOD = Method(
    name="test-time-rl",
    flows=("zero_shot",),
    settings=TtrlSettings,
    adapt=adapt,
    about="TTRL (Zuo et al. 2025): GRPO through TRL on the split's prompts, each sample rewarded for "
    "agreeing with the majority vote of its prompt's samples (the leak: with the gold choice)",
    recipe=RECIPE,
    diagnostics={
        "mean_reward": "mean reward",
        "zero_advantage_share": "zero advantage",
        "unmatched_share": "unmatched",
        "tie_share": "tied votes",
    },
    carries=True,
    check_task=check_task,
)
