"""The study's method: prompt TAPT, a (Q)LoRA adapter trained with TRL on the split's zero-shot prompts
(padding or packing; with their answers for the leak)."""

from __future__ import annotations

from harness.core.engine import models
from harness.tasks.prompts import PACK_SIZE
from tapt import adapter
from tapt.methods import Adapted, Inputs, Method, recipe_table


def adapt(x: Inputs) -> Adapted:
    run = adapter.prepare(
        x.spec,
        x.docs,
        x.settings,
        x.labeled,
        x.seed,
        x.model,
        x.tokenizer,
        x.workdir,
        x.carried(),
        copies=x.leak_strength,
    )
    return Adapted(adapter.train(run), adapter.record_of(run))


DEFAULTS = adapter.AdapterSettings()
LORA = f"r {adapter.LORA['r']}, alpha {adapter.LORA['lora_alpha']}, dropout {adapter.LORA['lora_dropout']}"
# the study's code: kddubey/pretrain-on-test at 80fd183 (src/pretrain_on_test/_dum.py, run.py, and the
# zero-shot experiments' launch scripts, cloud_scripts/gcp/experiments/zero-shot/n100/mistral_1.sh)
RECIPE = recipe_table(
    [
        ("LoRA", "r 16, alpha 32, dropout 0.05, all-linear (_dum.py:276-284)", f"{LORA}, all-linear", ""),
        (
            "epochs, batch, lr",
            "1, 8, 2e-4 with QLoRA (mistral_1.sh:15-17, _dum.py:308)",
            f"{DEFAULTS.epochs:g}, {DEFAULTS.batch_size}, {DEFAULTS.lr:g}",
            "",
        ),
        ("base", "QLoRA: NF4, double quantisation (_dum.py:186-194)", f"quantize {DEFAULTS.quantize}", ""),
        (
            "max length",
            "512 padding, 8192 packing (run.py:74, 85)",
            "the study's configs: 512 (zero_shot.yaml), 8192 (zero_shot_packing.yaml); unset: "
            f"{models.MAX_LENGTH} padding, {adapter.PACKED_MAX_LENGTH} packing",
            "unset keeps this tool's first lengths, so their results keep their hash",
        ),
        (
            "prompt",
            "the chat template where there is one: system the instruction, user the text, assistant "
            "' ### Answer:', trailing EOS cut (_dum.py:94-135, 166-176)",
            "the study's configs and the demo: prompt_format chat, the same turns, the assistant's turn "
            "left open (continue_final_message); unset: plain text, the study's text where a tokenizer "
            "has no template (_dum.py:81-91)",
            "cutting the EOS leaves a turn's closing tokens where a template ends in more than the EOS "
            "(SmolLM2: '<|im_end|>\\n'); left open, it is what the cut gives a template ending in the EOS",
        ),
        (
            "packing",
            "the instruction, then a batch's 8 texts per sequence; 1 sequence a step (_dum.py:241-252, 297)",
            f"the instruction, then {PACK_SIZE} texts per sequence; 1 sequence a step in "
            "zero_shot_packing.yaml (batch_size 1)",
            "",
        ),
        (
            "packing blocks",
            "each text '### Text: ...' ending in a new line, joined by a blank line (_dum.py:65-66, 247)",
            "each text without the closing new line, joined by a blank line",
            "the first packing results ran so and keep their settings hash; one new line a block, not "
            "measured",
        ),
        (
            "optimiser",
            "paged_adamw_8bit with QLoRA (_dum.py:307)",
            "the study's configs: optim paged_adamw_8bit; unset: adamw_torch",
            "",
        ),
        (
            "checkpointing",
            "gradient checkpointing with QLoRA (_dum.py:273-275)",
            "the study's configs: gradient_checkpointing true; unset: off",
            "",
        ),
        (
            "k-bit preparation",
            "prepare_model_for_kbit_training on the 4-bit base (_dum.py:275): its norms and head cast to "
            "float32, the embeddings' output made to require grad",
            "not called (TRL 1.16's SFTTrainer no longer calls it); the embeddings' output requires grad",
            "the base is loaded once and scored unadapted beside its adapters: the cast would move the "
            "base's own scores; its effect on training is not measured (it needs a GPU)",
        ),
        (
            "precision",
            "bf16 with QLoRA where the GPU has it, else fp16 (_dum.py:309-310)",
            "bf16 where the GPU has it; float32 on a GPU without it (a T4) and on a CPU unless bf16",
            "a CPU is opt-in: bf16 moves the numbers; fp16 is not offered (float32 is slower on a T4, and "
            "its numbers are not the study's fp16 ones)",
        ),
        (
            "scoring",
            "CAPPr: each class name's mean token log-prob, normalised over the classes (_dum.py:363-385)",
            "the study's configs and the demo: accuracy mean_token, the same rule; unset: lm-eval's acc "
            "(the summed log-prob); a unit records both",
            "",
        ),
    ]
)

METHOD = Method(
    name="prompt-tapt",
    flows=("zero_shot",),
    settings=adapter.AdapterSettings,
    adapt=adapt,
    about="the study's prompt TAPT: a (Q)LoRA adapter trained with TRL's SFTTrainer on the split's prompts",
    recipe=RECIPE,
    carries=True,
)
