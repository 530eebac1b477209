"""Makes `lm_eval --model hf-prompt-once` work in any process where tapt-bench is installed.

lm-eval 0.4 finds a model only in its own registry and has no plugin entry point, so the install adds
`tapt_bench_lm_eval.pth` (see setup.py), whose one line calls `install()` at interpreter start-up. It
imports nothing: it waits for lm-eval to import its model list, then registers the model lazily (as the
module path lm-eval imports on first use, the way lm-eval lists its own models).
"""

from __future__ import annotations

import sys

NAME = "hf-prompt-once"
TARGET = "harness.scoring.prompt_once:PromptOnceLM"
MODELS = "lm_eval.models"  # lm-eval's model list, imported before any model is looked up


def register() -> None:
    from lm_eval.api.registry import model_registry

    if NAME not in model_registry:
        model_registry.register(NAME, target=TARGET)


class _AfterModelList:
    """A meta-path finder (a protocol; importlib.abc would cost every start-up ~10 ms) that finds
    nothing itself: when lm-eval's model list is imported, it adds `register()` after it runs."""

    def find_spec(self, name, path, target=None):
        if name != MODELS:
            return None
        import importlib.util

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                register()

            spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    if MODELS in sys.modules:
        register()
    elif not any(isinstance(f, _AfterModelList) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterModelList())
