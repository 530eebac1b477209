"""A user's method, audited by the grid from this one file: tune only the base's normalisation weights
on the split's prompts (with their answers for the leak), then put the base's weights back.

    method: examples/norm_tuning.py:METHOD    # a file (relative to where the run starts), or a module:attr

It puts the base's weights back after each run, so it cannot carry on from one chunk of the stream to the
next: with the stream condition, set `stream_mode: restart`.
"""

from dataclasses import dataclass

import torch

from harness.api import Adapted, Inputs, Method, Settings, answered, option


@dataclass(kw_only=True)
class NormSettings(Settings):
    steps: int = option(4, "optimizer steps, one prompt each")
    lr: float = option(1e-3, "learning rate")


def adapt(x: Inputs) -> Adapted:
    texts = answered(x.spec, x.docs) if x.labeled else list(x.docs["prompt"])
    norms = {n: p for n, p in x.model.named_parameters() if "norm" in n}
    saved = {n: (p.detach().clone(), p.requires_grad) for n, p in norms.items()}
    # the optimizer steps float32 copies and writes them back: in bf16 (a GPU's default) a step of 1e-3
    # on a weight of 1.0 is under half its spacing, and stepping the weight itself would round it away
    master = {n: p.detach().float().clone().requires_grad_(True) for n, p in norms.items()}
    for p in norms.values():
        p.requires_grad_(True)
    torch.manual_seed(x.seed)
    opt = torch.optim.Adam(master.values(), lr=x.settings.lr)
    losses = []
    for text in texts[: x.settings.steps]:
        ids = x.tokenizer(text, return_tensors="pt")["input_ids"].to(x.model.device)
        loss = x.model(input_ids=ids, labels=ids).loss
        loss.backward(inputs=list(norms.values()))
        for n, p in norms.items():
            master[n].grad, p.grad = p.grad.float(), None
        opt.step(), opt.zero_grad()
        with torch.no_grad():
            for n, p in norms.items():
                p.copy_(master[n])
        losses.append(loss.item())

    def restore():
        with torch.no_grad():
            for n, p in norms.items():
                p.copy_(saved[n][0]).requires_grad_(saved[n][1])
        return x.model

    # learned_from: how many documents it learned from (0 marks the condition as not adapted)
    record = {"losses": losses, "learned_from": len(losses), "steps": len(losses), "last_loss": losses[-1]}
    return Adapted(x.model, record, restore)


METHOD = Method(
    "norm-tuning",
    ("zero_shot",),
    NormSettings,
    adapt,
    "tune only the normalisation weights",
    diagnostics={"last_loss": "last loss"},  # shown by summarize and report, per condition
)
