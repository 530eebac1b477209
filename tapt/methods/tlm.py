"""Test-time learning (TLM; Hu et al., "Test-Time Learning for Large Language Models", ICML 2025), offline
over the split: a LoRA that minimises the perplexity of the split's inputs, weighted by the paper's
Sample Efficient Learning Strategy.

The rule (the paper's section "Sample Efficient Learning Strategy"; its values from the authors'
released `examples/train_lora/offline_ttl.yaml`: `setting: offline_ttl`, `threshold: 3`, `lamb: 0.1`):
an input x whose log-perplexity L(x) exceeds the threshold (3, i.e. perplexity e^3) is learned with
weight lamb * exp(L(x) - threshold); an input below it is skipped (weight 0). L(x) is read from the
frozen base, the adapter disabled, without gradients, and the weighted loss is averaged over the
selected inputs of a step. A step with none selected has a zero gradient; AdamW's momentum from earlier
steps still moves the adapter then, as in any Trainer. LoRA on q_proj and v_proj (rank 8, alpha 16,
LLaMA-Factory's defaults), lr 5e-5, batch 1, 1 epoch, cosine schedule after 10% warm-up, as the
authors' config. The inputs are the prompts lm-eval shows the model (with their answers for the leak:
TLM given the gold labels, the ceiling).

The authors' online setting (`online_ttl.yaml`) streams the test set in chunks of 8: the current model
predicts a chunk, then the same adapter trains on it with a fresh optimiser at a constant lr, each input
selected and weighted by the current model's own log-perplexity. That is the grid's `stream` condition
in its carry mode (Inputs.online), where this module runs that rule. `tapt-bench methods show
test-time-learning` prints the recipe against the authors' released config, point by point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.core.plumbing.errors import SettingsError
from harness.core.plumbing.settings import Settings, option
from harness.tasks.protocol import answered
from tapt.methods import Adapted, Inputs, Method, recipe_table

if TYPE_CHECKING:
    import torch


@dataclass(kw_only=True)
class TlmSettings(Settings):
    """TLM's settings, at the paper's values where they apply to these models."""

    ABOVE = {"lr": 0.0, "epochs": 0.0}  # an lr or epochs of 0 train nothing
    MINIMUM = {
        "batch_size": 1,
        "lamb": 0.0,
        "lora_r": 1,
        "lora_alpha": 1,
        "threshold": 0.0,  # a log-perplexity is at least 0: below it every weight overflows
        "warmup_ratio": 0.0,
    }
    BELOW = {"warmup_ratio": 1.0}

    rule: str = option(
        "offline",
        "offline: each input's log-perplexity from the frozen base (adapter disabled), the loss averaged "
        "over the selected inputs (the authors' offline setting; their online one runs in the stream "
        "condition's carry mode)",
    )
    threshold: float = option(3.0, "log-perplexity below which an input is skipped (the paper's P0 = e^3)")
    lamb: float = option(0.1, "the weight's scale lambda")
    epochs: float = option(1.0, "passes over the split's inputs")
    lr: float = option(5e-5, "learning rate")
    batch_size: int = option(1, "inputs per step")
    lora_r: int = option(8, "LoRA rank")
    lora_alpha: int = option(16, "LoRA alpha")
    target_modules: list[str] = option(["q_proj", "v_proj"], "modules LoRA adapts")
    warmup_ratio: float = option(0.1, "linear warm-up share of the steps, then cosine decay")

    def check(self) -> None:
        super().check()
        if self.rule != "offline":
            raise SettingsError.of(
                "rule",
                f"must be 'offline', got {self.rule!r}; the authors' online setting (each chunk of test "
                "scored, then trained on) is the grid's stream condition in its carry mode (stream_mode: "
                "carry): add stream to conditions",
            )


def weights(log_ppl: torch.Tensor, threshold: float, lamb: float) -> torch.Tensor:
    """The Sample Efficient Learning weight of each input from its log-perplexity."""
    import torch

    return torch.where(log_ppl > threshold, lamb * torch.exp(log_ppl - threshold), torch.zeros_like(log_ppl))


def log_perplexity(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per sequence: the mean negative log-likelihood of its tokens (labels -100 are ignored)."""
    import torch

    target = labels[:, 1:]
    mask = target != -100
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    picked = logp.gather(-1, target.clamp_min(0)[..., None])[..., 0]
    return -(picked * mask).sum(1) / mask.sum(1).clamp_min(1)


def selectable(model, ids: list[list[int]], threshold: float) -> bool:
    """Whether the frozen base selects any input (offline, its log-perplexity is the weight's input, and
    it does not change in training): one forward pass each, without gradients."""
    import torch

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for seq in ids:
                batch = torch.tensor([seq], device=model.device)
                if (
                    float(log_perplexity(model(input_ids=batch, use_cache=False).logits, batch)[0])
                    > threshold
                ):
                    return True
    finally:
        model.train(was_training)
    return False


def trainer_class():
    import torch
    from transformers import Trainer

    class TlmTrainer(Trainer):
        """The Trainer with TLM's weighted input-perplexity loss; counts the inputs it learned from."""

        selected = seen = 0
        online = False  # the authors' online rule: selected by the current model, in the same forward
        learned: set  # the distinct inputs (their tokens) that got a weight above 0 in some step
        weights: list  # each step's weights, in order

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            labels = inputs.pop("labels")
            if not self.online:
                with torch.no_grad(), model.disable_adapter():  # the frozen base's perplexity: no graph
                    scored = log_perplexity(model(**inputs, use_cache=False).logits, labels)
            out = model(**inputs, use_cache=False)
            nll = log_perplexity(out.logits, labels)
            if self.online:  # the current model's own perplexity, as the weight's input: no gradient
                scored = nll.detach()
            w = weights(scored, self.tlm.threshold, self.tlm.lamb)
            self.weights.append(w.tolist())
            chosen = w > 0
            self.selected, self.seen = self.selected + int(chosen.sum()), self.seen + len(w)
            for row in labels[chosen]:
                self.learned.add(tuple(row[row != -100].tolist()))
            if chosen.any():
                loss = (w * nll)[chosen].sum() / chosen.sum()
            else:  # nothing selected in this step: a zero gradient (AdamW's momentum may still move)
                loss = (nll * 0.0).sum()
            return (loss, out) if return_outputs else loss

    return TlmTrainer


def adapt(x: Inputs) -> Adapted:  # torch and the trainers load as a unit runs, not as methods are listed
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import DataCollatorForLanguageModeling, set_seed

    from harness.core.engine import models, training

    s: TlmSettings = x.settings
    set_seed(x.seed)
    texts = answered(x.spec, x.docs, x.leak_strength) if x.labeled else list(x.docs["prompt"])
    ids = x.tokenizer(texts, truncation=True, max_length=models.MAX_LENGTH)["input_ids"]
    if not x.online and not selectable(x.model, ids, s.threshold):  # no step would learn: say so now
        record = {"sequences": len(ids), "selected": 0, "seen": len(ids), "learned_from": 0, "steps": 0}
        return Adapted(x.model, record, restore=lambda: x.model)
    lora = LoraConfig(
        r=s.lora_r,
        lora_alpha=s.lora_alpha,
        target_modules=s.target_modules,
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
    )
    model = x.lora(lora)
    steps = training.StepLog("lower test-time-learning's lr or raise its threshold, in its method settings")
    args = training.arguments(
        x.workdir,
        s.epochs,
        s.lr,
        s.batch_size,
        x.seed,  # online: the authors' constant lr, no warm-up, a fresh optimiser each chunk
        lr_scheduler_type="constant" if x.online else "cosine",
        warmup_steps=0.0 if x.online else s.warmup_ratio,  # transformers 5: below 1, a share of the steps
    )
    trainer = trainer_class()(
        model=model,
        args=args,
        train_dataset=Dataset.from_dict({"input_ids": ids}),
        data_collator=DataCollatorForLanguageModeling(x.tokenizer, mlm=False),
        callbacks=[steps],
    )
    trainer.tlm, trainer.learned, trainer.weights, trainer.online = s, set(), [], x.online
    trainer.train()
    record = {
        "selected_by": "current model" if x.online else "frozen base",
        "sequences": len(ids),
        "tokens": int(sum(map(len, ids))),
        "selected": trainer.selected,
        "seen": trainer.seen,
        "learned_from": len(trainer.learned),
        "weights": trainer.weights,
        "rows": x.docs["row"].tolist(),
        **steps.summary(),
    }
    return Adapted(model, record)


# the authors' code: Fhujinwu/TLM at 0ff4db9 (examples/train_lora/{offline,online}_ttl.yaml, and
# src/llamafactory/train/ttl/{trainer,workflow}.py, hparams/finetuning_args.py for LoRA's defaults)
RECIPE = recipe_table(
    [
        (
            "loss",
            "the input's mean token cross-entropy (trainer.py:168-181)",
            "the same, on the prompt lm-eval shows",
            "",
        ),
        ("threshold", "3 (offline_ttl.yaml:15)", "3", ""),
        (
            "weight",
            "lamb * exp(L - threshold), lamb 0.1; 0 at or below (trainer.py:226-227, offline_ttl.yaml:16)",
            "the same",
            "",
        ),
        (
            "scored by",
            "the frozen base, adapter disabled, no gradient (trainer.py:219-222)",
            "the same (rule: offline)",
            "",
        ),
        (
            "reduction",
            "weighted loss summed over the selected inputs, over their count (trainer.py:235-239)",
            "the same; none selected: a zero gradient",
            "",
        ),
        (
            "online setting",
            "chunks of 8 (online_ttl.yaml:17): the current model predicts a chunk, then the same adapter "
            "trains on it, constant lr, selecting by the current model's loss (workflow.py:125-160, "
            "202-215; online_ttl.yaml:44; trainer.py:243-251)",
            "the stream condition (stream_mode carry, stream_chunk_size 8): the same, one adapter carried "
            "on, a fresh optimiser a chunk, constant lr, no warm-up, selected by the current model's loss "
            "in its training forward",
            "stream_mode restart keeps the first stream: chunk i scored by a run from the base on chunks "
            "0..i-1, offline rule",
        ),
        (
            "tokens",
            "the input in the llama3 chat template, 4096 (offline_ttl.yaml:24-25)",
            "lm-eval's zero-shot prompt, 256",
            "the design scores it",
        ),
        (
            "LoRA",
            "q_proj, v_proj; rank 8, alpha 16, dropout 0 (offline_ttl.yaml:10, finetuning_args.py:73-83)",
            "the same",
            "",
        ),
        ("lr, batch", "5e-5; batch 1, no accumulation (offline_ttl.yaml:39-41)", "the same", ""),
        ("epochs", "1, cosine after 10% warm-up (offline_ttl.yaml:42-44)", "the same", ""),
        (
            "precision",
            "bf16 (offline_ttl.yaml:45)",
            "the same on a GPU; float32 on a CPU unless bf16",
            "a CPU is opt-in: bf16 moves the numbers",
        ),
    ]
)

METHOD = Method(
    name="test-time-learning",
    flows=("zero_shot",),
    settings=TlmSettings,
    adapt=adapt,
    about="TLM (Hu et al., ICML 2025): LoRA minimising the split's input perplexity, high-perplexity "
    "inputs selected and weighted",
    recipe=RECIPE,
    diagnostics={"selected": "selected"},
    carries=True,
)
