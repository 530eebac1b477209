"""GRPO reading each prompt once per group gives what TRL's own trainer gives: the same samples (greedy),
the same per-token log-probs and entropies, the same loss and the same LoRA gradients, on a tiny Llama
with prompts of different lengths (so left padding is exercised) and completions cut at different ends.
The log-probs are compared on sampled completions (temperature 1), which differ within a group, so that
a row scored on another row's completion shows; in float32 and in bf16."""

from unittest import mock

import pytest
import torch

pytest.importorskip("trl")

from trl import GRPOConfig, GRPOTrainer

from tapt.methods.test_time_rl.grpo_groups import GroupedGRPOTrainer, groups, left_padded

PROMPTS = ["Title: Stocks fall again\nTopic:", "Hi", "A much longer prompt about the weather in Paris today:"]


def length_reward(completions, **kwargs):
    return [float(len(c)) for c in completions]


def make_trainer(tiny_llama, folder, sample: bool = False, dtype=torch.float32):
    from datasets import Dataset
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(tiny_llama)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_llama, dtype=dtype),
        LoraConfig(
            r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM", init_lora_weights=False
        ),
    )
    if sample:  # logits of spread 0.8 instead of 0.16 (random weights predict near-uniformly), so that a
        # token scored in the wrong row moves its log-prob by nats, in bf16 too
        with torch.no_grad():
            model.get_base_model().model.norm.weight *= 5
    args = GRPOConfig(
        output_dir=str(folder),
        per_device_train_batch_size=4,
        num_generations=4,
        steps_per_generation=3,
        max_completion_length=5,
        beta=0.01,
        temperature=1.0 if sample else 0.7,
        report_to="none",
        use_cpu=True,
        bf16=dtype == torch.bfloat16,  # TRL's default autocasts to bf16 where the CPU has it: set here
        generation_kwargs={"do_sample": sample},
    )
    data = Dataset.from_dict({"prompt": PROMPTS})
    return GroupedGRPOTrainer(
        model=model, reward_funcs=length_reward, args=args, train_dataset=data, processing_class=tok
    )


@pytest.fixture(scope="module")
def trainer(tiny_llama, tmp_path_factory):
    """Greedy: a group's completions are identical (what the sampling test compares)."""
    return make_trainer(tiny_llama, tmp_path_factory.mktemp("grpo"))


# float32 holds TRL's numbers to rounding; bf16 to its 8 bits of mantissa (a row scored on another row's
# completion moves a log-prob by whole nats, far beyond either)
TOLERANCES = {torch.float32: (1e-5, 1e-4), torch.bfloat16: (6e-2, 2e-2)}


@pytest.fixture(scope="module", params=[torch.float32, torch.bfloat16], ids=["float32", "bf16"])
def sampled(request, tiny_llama, tmp_path_factory):
    """Sampling at temperature 1: a group's completions differ."""
    torch.manual_seed(1)
    return make_trainer(tiny_llama, tmp_path_factory.mktemp("grpo"), sample=True, dtype=request.param)


def as_trl(name):
    return mock.patch.object(GroupedGRPOTrainer, name, getattr(GRPOTrainer, name))


def test_groups_are_runs_of_equal_rows():
    assert groups([1, 1, 2, 2, 2, 1]) == [(0, 2), (2, 5), (5, 6)] and groups([]) == []


def test_sampling_from_one_prefill_per_prompt_gives_trls_samples(trainer):
    prompt_ids, _, _ = trainer._tokenize_prompts([p for p in PROMPTS for _ in range(4)])
    ours, _ = trainer._generate_single_turn(prompt_ids, None, {}, 4)
    with as_trl("_generate_single_turn"):
        theirs, _ = trainer._generate_single_turn(prompt_ids, None, {}, 4)
    assert ours == theirs and len(ours) == 12 and all(len(c) >= 1 for c in ours)


def test_log_probs_loss_and_gradients_equal_trls_on_completions_that_differ_within_a_group(sampled):
    trainer, dtype = sampled, sampled.model.dtype
    atol, rtol = TOLERANCES[dtype]
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by the Trainer's loop; one step here
    batch = trainer._generate_and_score_completions([{"prompt": p} for p in PROMPTS for _ in range(4)])
    lengths = batch["completion_mask"].sum(1)
    widths = batch["prompt_mask"].sum(1)
    assert len(set(widths.tolist())) == 3 and (batch["prompt_mask"] == 0).any()  # left padding exercised
    completions = [tuple(c) for c in batch["completion_ids"].tolist()]
    assert all(len(set(completions[g : g + 4])) > 1 for g in (0, 4, 8))  # sampled: every group differs
    batch["completion_mask"][1, 2:] = 0  # one completion ends early, as at an end-of-sequence token
    batch["advantages"] = torch.linspace(-1.5, 1.5, 12)  # fixed, so that the loss is not 0
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    keep = batch["completion_ids"].size(1)

    def run():
        logps, ent, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, ids, mask, keep, compute_entropy=True
        )
        trainer.model.zero_grad()
        loss = trainer._compute_loss(trainer.model, batch)
        loss.backward()
        grads = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
        return logps.detach(), ent.detach(), loss.detach(), grads

    ours = run()
    with as_trl("_get_per_token_logps_and_entropies"):
        theirs = run()
    assert lengths.min() >= 1
    torch.testing.assert_close(ours[0], theirs[0], atol=atol, rtol=rtol)  # per-token log-probs
    torch.testing.assert_close(ours[1], theirs[1], atol=atol, rtol=rtol)  # entropies
    torch.testing.assert_close(ours[2], theirs[2], atol=atol / 10, rtol=rtol)  # loss
    assert ours[2].abs() > 0 and len(ours[3]) > 0
    flat = [torch.cat([g.float().reshape(-1) for g in grads[3].values()]) for grads in (ours, theirs)]
    if dtype == torch.float32:
        for name, grad in ours[3].items():
            torch.testing.assert_close(grad, theirs[3][name], atol=1e-6, rtol=1e-3, msg=name)
    else:  # bf16: the direction of the whole gradient, and its size
        assert torch.nn.functional.cosine_similarity(flat[0], flat[1], dim=0) > 0.99
        assert abs(flat[0].norm() / flat[1].norm() - 1) < 0.02
    assert flat[0].abs().sum() > 0  # the gradients are not all zero


def test_a_step_holds_whole_prompt_groups_in_order(trainer):
    trainer.model.train()
    trainer._step, trainer._buffered_inputs = 0, None
    inputs = [{"prompt": p} for p in PROMPTS for _ in range(4)]
    steps = []
    for i in range(3):
        trainer._step = i
        steps.append(trainer._prepare_inputs(inputs))
    trainer._step = 0
    for step in steps:
        rows = [tuple(r) for r in step["prompt_ids"].tolist()]
        assert len(set(rows)) == 1  # one prompt's four completions, not a shuffle of the rollout
    assert len({tuple(s["prompt_ids"][0].tolist()) for s in steps}) == 3


def test_under_gradient_checkpointing_the_policys_forward_is_trls_own(trainer):
    """Checkpointing keeps no cache, so the grouped forward steps aside: the numbers are TRL's."""
    prompt_ids, _, _ = trainer._tokenize_prompts(PROMPTS)
    ids, mask = left_padded(prompt_ids, trainer._tokenizer.pad_token_id)
    trainer.model.gradient_checkpointing_enable()
    trainer.model.train()
    try:
        with mock.patch.object(GroupedGRPOTrainer, "_group_logps", side_effect=AssertionError("grouped")):
            ours, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, 3)
        with as_trl("_get_per_token_logps_and_entropies"):
            theirs, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, 3)
    finally:
        trainer.model.gradient_checkpointing_disable()
    torch.testing.assert_close(ours, theirs)
