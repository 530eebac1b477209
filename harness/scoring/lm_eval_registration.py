"""Makes the design's command work as written in any process where tapt-bench is installed:
`lm_eval --model hf --model_args peft=ADAPTER --tasks tapt_ag_news`.

lm-eval 0.4 has no plugin entry point for models or task folders, so the install adds
`tapt_bench_lm_eval.pth` (see setup.py), whose one line calls `install()` at interpreter start-up. It
imports nothing itself: it waits for lm-eval to import the module that holds each thing, then adds
- the `hf-prompt-once` model to lm-eval's registry (lazily, as the module path, the way lm-eval lists its
  own models);
- the tapt_* task folder to every TaskManager's paths, after the user's `--include_path` (which may still
  name it: it is scanned once);
- `pretrained` read from the adapter's `base_model_name_or_path` when an `hf` model gets `peft=` alone.
"""

from __future__ import annotations

import functools
import sys

NAME = "hf-prompt-once"
TARGET = "harness.scoring.prompt_once:PromptOnceLM"


def register(models=None) -> None:  # `models`: lm-eval's model list, once imported
    from lm_eval.api.registry import model_registry

    if NAME not in model_registry:
        model_registry.register(NAME, target=TARGET)


def with_tapt_tasks(include_path):
    """`include_path` (None, a path, or a list of them) with the tapt_* task folder added once."""
    from pathlib import Path

    from harness.tasks.spec import TASKS_DIR

    paths = (
        []
        if include_path is None
        else list(include_path)
        if isinstance(include_path, list | tuple)
        else [include_path]
    )
    if all(Path(p).resolve() != TASKS_DIR for p in paths):
        paths.append(str(TASKS_DIR))
    return paths


def add_task_folder(manager) -> None:
    init = manager.TaskManager.__init__
    if getattr(init, "tapt_bench", False):
        return

    @functools.wraps(init)
    def with_ours(self, verbosity=None, include_path=None, *args, **kwargs):
        init(self, verbosity, with_tapt_tasks(include_path), *args, **kwargs)

    with_ours.tapt_bench = True
    manager.TaskManager.__init__ = with_ours
    match = manager.TaskManager.match_tasks

    @functools.wraps(match)
    def with_nearest(self, task_list):
        found = match(self, task_list)
        unknown = [t for t in task_list if t.startswith("tapt_") and t not in found]
        if unknown:
            raise unknown_tasks(unknown, self.all_tasks, self.include_path)
        return found

    manager.TaskManager.match_tasks = with_nearest


def unknown_tasks(unknown: list[str], known: list[str], include_path=None):
    """An error for tapt_* task names lm-eval does not know, with the nearest known names, and each YAML
    under `include_path` that cannot be read (lm-eval skips it in silence; it may be the task), in the
    words `tapt-bench run` uses."""
    import difflib

    from harness.core.plumbing.errors import UserError, print_user_errors
    from harness.tasks.spec import unreadable

    print_user_errors("lm_eval")
    ours = [t for t in known if t.startswith("tapt_")]
    near = {t: difflib.get_close_matches(t, ours, n=3, cutoff=0.5) for t in unknown}
    said = "; ".join(
        f"{t}: did you mean {', '.join(n)}?" if n else f"{t}: no close name" for t, n in near.items()
    )
    broken = "".join(
        f"\n  unreadable, and it may be the task: {err}" for err in unreadable(with_tapt_tasks(include_path))
    )
    return UserError(f"lm_eval --tasks: no such task ({said}); `tapt-bench tasks list` lists them{broken}")


def base_of(peft) -> str:
    """The base model an adapter names in its config (a folder or a hub id); its errors print alone."""
    from harness.core.engine.models import adapter_base
    from harness.core.plumbing.errors import print_user_errors

    print_user_errors("lm_eval")
    return adapter_base(peft)


def weights_print(folder: str) -> tuple | None:
    """What identifies a local model folder's weights: its config, and each weight file's name, size and the
    SHA-256 of its first MiB (its header and first tensors); None for a hub id."""
    import hashlib
    import json
    from pathlib import Path

    path = Path(folder).expanduser()
    if not (path / "config.json").is_file():
        return None
    files = sorted(p for p in path.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file())
    heads = []
    for f in files:
        with open(f, "rb") as handle:
            heads.append((f.name, f.stat().st_size, hashlib.sha256(handle.read(2**20)).hexdigest()))
    return json.loads((path / "config.json").read_text()), heads


def same_base(pretrained: str, peft) -> None:
    """An adapter given beside pretrained= must have been trained on it: the same folder or name, or a copy
    of its folder (the same config and weight files); one of another base fails deep inside PEFT."""
    from pathlib import Path

    trained_on = base_of(peft)
    if Path(trained_on.rstrip("/")).name == Path(pretrained.rstrip("/")).name:
        return
    ours = weights_print(trained_on)
    if ours is not None and ours == weights_print(pretrained):
        return
    from harness.core.plumbing.errors import UserError

    raise UserError(
        f"lm_eval --model_args peft={peft}: the adapter was trained on {trained_on!r}, not on "
        f"pretrained={pretrained!r}; pass pretrained={trained_on}, or drop pretrained= (the adapter names it)"
    )


def init_with_base(init, self, pretrained=None, *args, **kwargs) -> None:
    """lm-eval's HFLM.__init__ (`init`) with the base an adapter names where pretrained= is not given, an
    embedded default by name, and every load's failure one line naming the key to fix."""
    if isinstance(pretrained, str) and embedded(pretrained):
        from harness.core.engine.models import resolve

        pretrained = resolve(pretrained)  # an embedded default by name: its prepared folder
    named = "pretrained="  # as the user gave it, or the adapter's config where they did not
    if pretrained is None:
        pretrained = base_of(kwargs.get("peft"))
        named = f"peft={kwargs.get('peft')}: its base (adapter_config.json's base_model_name_or_path) "
    elif kwargs.get("peft") and isinstance(pretrained, str):
        same_base(pretrained, kwargs["peft"])
    if not isinstance(pretrained, str):
        return init(self, pretrained, *args, **kwargs)
    from harness.core.engine.models import check_weights
    from harness.core.plumbing.errors import UserError

    try:
        check_weights(pretrained, named)
        if kwargs.get("peft"):
            check_weights(kwargs["peft"], "peft=")
    except UserError as err:
        raise one_line(str(err)) from None
    try:
        init(self, pretrained, *args, **kwargs)
    except OSError as err:  # no such folder, or a hub id out of reach: transformers' traceback
        fix = "name a model folder, or a hub id this machine can reach"
        if named != "pretrained=":
            fix = "pass pretrained=BASE, the base it was trained on, or fix that key"
        raise one_line(f"{named}{pretrained}: cannot load it ({first_line(err)}); {fix}") from None
    except RuntimeError as err:
        if "size mismatch" not in str(err):
            raise
        raise one_line(
            f"peft={kwargs.get('peft')}: its weights do not fit pretrained={pretrained} "
            "(size mismatch): the adapter was trained on another base; pass that base as "
            "pretrained=, or fix base_model_name_or_path in its adapter_config.json"
        ) from None
    if kwargs.get("peft"):
        from harness.tasks.adapters import check_record

        try:
            check_record(kwargs["peft"], self._model)
        except UserError as err:
            raise one_line(f"peft={err}") from None


def pretrained_from_adapter(huggingface) -> None:
    init = huggingface.HFLM.__init__
    if getattr(init, "tapt_bench", False):
        return

    @functools.wraps(init)
    def with_base(self, pretrained=None, *args, **kwargs):
        return init_with_base(init, self, pretrained, *args, **kwargs)

    with_base.tapt_bench = True
    huggingface.HFLM.__init__ = with_base
    info = huggingface.HFLM.get_model_info

    @functools.wraps(info)
    def with_adapter_hash(self) -> dict:  # lm-eval asks the hub for a sha: a local adapter gets ''
        out = info(self)
        if getattr(self, "peft", None):
            from harness.core.engine.weights import adapter_sha256

            out["peft_sha256"] = adapter_sha256(self._model)
        return out

    huggingface.HFLM.get_model_info = with_adapter_hash


def embedded(name: str) -> bool:
    """Whether `name` is an embedded default model's (SmolLM2-135M-Instruct) and no folder of that name."""
    from pathlib import Path

    from harness.core.engine.models import PACKAGES

    return name in PACKAGES and not Path(name).exists()


def first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def one_line(message: str):
    """A UserError that lm_eval's command prints as one line."""
    from harness.core.plumbing.errors import UserError, print_user_errors

    print_user_errors("lm_eval")
    return UserError(f"lm_eval --model_args {message}")


def metadata_errors() -> None:
    """lm_eval's --metadata (and --model_args) parser raises a bare ValueError on text that is not JSON,
    from its argparse action: print it as argparse's own one-line usage error, by a process hook of
    Python's (sys.excepthook), not by changing lm-eval's private action."""
    previous = sys.excepthook
    if getattr(previous, "tapt_bench_metadata", False):
        return

    def hook(kind, err, tb):
        frames, walk = [], tb
        while walk is not None:
            frames.append(walk.tb_frame)
            walk = walk.tb_next
        cli = [f for f in frames if f.f_code.co_filename.replace("\\", "/").endswith("lm_eval/_cli/utils.py")]
        if issubclass(kind, ValueError) and cli and frames[-1] is cli[-1]:
            flag = cli[-1].f_locals.get("option_string") or "--metadata"
            sys.stderr.write(f"lm_eval: error: argument {flag}: {err}\n")
            raise SystemExit(2)
        previous(kind, err, tb)

    hook.tapt_bench_metadata = True
    sys.excepthook = hook


# Each of lm-eval's own functions the install wraps, the parameters it reads (a test fails where lm-eval
# changes them), and the public API it stands in for: lm-eval 0.4 has none of these hooks.
PATCHED = {
    ("lm_eval.tasks.manager", "TaskManager.__init__"): (
        ("self", "verbosity", "include_path"),
        "a task-folder entry point: the tapt_* tasks found without --include_path",
    ),
    ("lm_eval.tasks.manager", "TaskManager.match_tasks"): (
        ("self", "task_list"),
        "a hook on unknown task names: a tapt_* name lm-eval does not know, with the nearest and why",
    ),
    ("lm_eval.models.huggingface", "HFLM.__init__"): (
        ("self", "pretrained"),
        "peft= alone: the adapter's base read from its config (lm-eval asks for pretrained=)",
    ),
    ("lm_eval.models.huggingface", "HFLM.get_model_info"): (
        ("self",),
        "a model-info hook: a local adapter's SHA-256 in the results (lm-eval asks the hub for one)",
    ),
}


AFTER = {  # lm-eval's module -> what to add once it has run
    "lm_eval.models": register,
    "lm_eval.tasks.manager": add_task_folder,
    "lm_eval.models.huggingface": pretrained_from_adapter,
}


class _After:
    """A meta-path finder (a protocol; importlib.abc would cost every start-up ~10 ms) that finds
    nothing itself: when one of AFTER's modules is imported, it runs that module's addition after it."""

    def __init__(self):
        self.left = set(AFTER)

    def find_spec(self, name, path, target=None):
        if name not in self.left:
            return None
        import importlib.util

        sys.meta_path.remove(self)  # find the real spec without finding ourselves
        self.left.discard(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            if self.left:
                sys.meta_path.insert(0, self)
        if spec is not None and spec.loader is not None:
            run, add = spec.loader.exec_module, AFTER[name]

            def exec_module(module):
                run(module)
                add(module)

            spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    import logging
    import os

    if os.path.basename(sys.argv[0] if sys.argv else "") in ("lm_eval", "lm-eval"):
        metadata_errors()
    # bitsandbytes says at import, on CPUs with AVX512-BF16, that an optional hub kernel for 4-bit CPU
    # inference is missing (a speed, never a number): noise before lm_eval's and our scripts' own words
    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)
    if any(isinstance(f, _After) for f in sys.meta_path):
        return
    finder = _After()
    for name, add in AFTER.items():
        if name in sys.modules:
            add(sys.modules[name])
            finder.left.discard(name)
    if finder.left:
        sys.meta_path.insert(0, finder)
