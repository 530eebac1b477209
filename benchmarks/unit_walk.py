"""One unit's walk through the packages: how often the work changes package, and how often each lookup
that should happen once per run happens.

Runs one zero-shot unit (ag_news, m 4, n 6, a 2-layer random Llama with SmolLM2's tokenizer) with two
adapted conditions (base, extra, test) and with three (base, extra, test, leak), each from its config
file to its written record, under a profiler that sees every call into the project's own files. A
package change is a call whose file lies in another package folder (harness/grid/unit, harness/core,
tapt/methods, ...) than the previous such call's; it is also counted with harness/grid and harness/study
as one folder, as the grid was before its split into configuration, unit and execution. Calls of the
libraries (torch, lm-eval, TRL) are not counted.

It also counts the method settings' round trips (an instance of the method's settings class built
during the run anywhere but where the config is resolved: values turned back into the typed value
they were resolved from) and, in the source, the seed derivations: the functions that build a seed
from the run's seed and a unit's index, and the stages that read the run's seed raw.
Usage:
    python benchmarks/unit_walk.py [--data-dir tests/data]
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.core.plumbing.settings import option, parse_script

ROOT = Path(__file__).resolve().parent.parent
OWN = tuple(str(ROOT / p) + "/" for p in ("harness", "tapt", "contamination"))
LOOKUPS = {  # the function, by the file that defines it
    ("harness/tasks/protocol.py", "find_spec"): "find_spec",
    ("harness/tasks/protocol.py", "subsample_docs"): "subsample_docs",
    ("tapt/methods/__init__.py", "find"): "methods.find",
    ("tapt/methods/registry.py", "find"): "methods.find",
    ("harness/grid/configuration/study_layout.py", "read_old_keys"): "read_old_keys",
    (
        "harness/grid/configuration/config.py",
        "result_settings",
    ): "recorded settings",  # before the plan read them
    ("harness/grid/configuration/config.py", "settings_of"): "method settings",
    ("harness/grid/configuration/resolve.py", "recorded"): "recorded settings",
    ("harness/grid/configuration/resolve.py", "method_settings"): "method settings",
}


@dataclass(kw_only=True)
class WalkArgs:
    data_dir: str = option(str(ROOT / "tests" / "data"), "the data folder (the tests' made-up samples)")
    adapted: Literal[0, 2, 3] = option(
        0, "walk one unit with 2 or 3 adapted conditions; 0: both, each in a fresh process"
    )


def tiny_llama(out: Path) -> Path:
    """A 2-layer Llama of random weights with SmolLM2's tokenizer, as the tests build it."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from harness.core.engine import models

    tok = models.embedded_tokenizer(models.SMOLLM2)
    torch.manual_seed(0)
    shape = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)
    ids = dict(pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    cfg = LlamaConfig(vocab_size=len(tok), num_key_value_heads=2, tie_word_embeddings=True, **shape, **ids)
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def seed_derivations() -> tuple[list[str], list[str]]:
    """(functions that combine the run's seed with a unit's index, stages that read the run's seed raw) in
    the product code, as `file:function`."""
    import ast

    built, raw = [], []
    for path in sorted(p for d in ("harness", "tapt", "contamination") for p in (ROOT / d).rglob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            where = f"{path.relative_to(ROOT)}:{fn.name}"
            for n in ast.walk(fn):
                seed = [e for e in getattr(n, "elts", ()) if ast.unparse(e).endswith("seed")]
                if isinstance(n, ast.List) and seed and any(ast.unparse(e) in INDEX for e in n.elts):
                    built.append(where)
                if isinstance(n, ast.BinOp) and {ast.unparse(n.left), ast.unparse(n.right)} & INDEX:
                    built += [where] * any(ast.unparse(s).endswith("seed") for s in (n.left, n.right))
                if isinstance(n, ast.Attribute) and ast.unparse(n) in (
                    "plan.sample.seed",
                    "self.plan.sample.seed",
                ):
                    raw.append(where)
    return sorted(set(built)), raw


FLAT = re.compile(r"harness/(grid|study)(/.*)?$")
INDEX = {"k", "subsample"}  # a unit's index, as the product code names it
STAGES = (
    "harness/grid/unit/flows",
    "harness/grid/unit/unit_record",
    "harness/study/null_models",
    "harness/grid/unit/stream",
)


def walk(config: Path) -> tuple[list[int], dict[str, int], int]:
    """(package changes: by folder, and with harness/grid and harness/study as one folder; calls of
    each once-a-run lookup; the method settings' round trips) of one grid
    run of `config`."""
    import harness
    from tapt import methods

    changes, lookups, last, trips = [0, 0], dict.fromkeys(LOOKUPS.values(), 0), [None, None], [0]
    typed = methods.find("prompt-tapt").settings

    def resolving(frame) -> bool:
        while frame is not None:
            if frame.f_code.co_name in ("method_settings", "configured"):
                return True
            frame = frame.f_back
        return False

    def seen(frame, event, arg):
        nonlocal changes
        name = frame.f_code.co_filename
        if (
            event == "call"
            and frame.f_code.co_name == "__init__"
            and type(frame.f_locals.get("self")) is typed
        ):
            trips[0] += not resolving(frame.f_back)
        if event != "call" or not name.startswith(OWN):
            return
        package = str(Path(name).parent)
        flat = FLAT.sub("harness/grid", package)  # the grid as one folder, as it was before its split
        changes[0] += last[0] is not None and package != last[0]
        changes[1] += last[1] is not None and flat != last[1]
        last[:] = [package, flat]
        which = LOOKUPS.get((str(Path(name).relative_to(ROOT)), frame.f_code.co_name))
        if which:
            lookups[which] += 1

    sys.setprofile(seen)
    try:
        harness.run(config)  # as `tapt-bench run` does: checked once, on load, each cell planned once
    finally:
        sys.setprofile(None)
    return changes, lookups, trips[0]


def main() -> None:
    args = parse_script(WalkArgs, __doc__)
    if not args.adapted:  # each in a process of its own: nothing one walk cached serves the other
        for adapted in (2, 3):
            subprocess.run([sys.executable, __file__, "--data-dir", args.data_dir, "--adapted", str(adapted)])
        return
    conds = ["base", "extra", "test", "leak"][: args.adapted + 1]
    with tempfile.TemporaryDirectory() as tmp:
        cfg = {
            "base": str(tiny_llama(Path(tmp) / "llama")),
            "model_tag": "tiny",
            "tasks": ["ag_news"],
            "m": 4,
            "n": 6,
            "subsamples": 1,
            "conditions": conds,
            "quantize": "none",
            "data_dir": str(Path(args.data_dir).resolve()),  # a config reads a relative folder from its own
            "method_settings": {"prompt-tapt": {"lr": 0.01, "batch_size": 4, "epochs": 1}},
            "out": str(Path(tmp) / "out"),
        }
        path = Path(tmp) / "walk.yaml"
        path.write_text(json.dumps(cfg))
        changes, lookups, trips = walk(path)
    said = ", ".join(f"{k} {v}" for k, v in lookups.items())
    by_folder, flat = changes
    print(f"{args.adapted} adapted conditions: {by_folder} package changes; lookups: {said}", flush=True)
    print(f"  package changes with harness/grid and harness/study one folder, as before the split: {flat}")
    print(f"  method settings round trips: {trips}", flush=True)
    if args.adapted == 3:
        built, raw = seed_derivations()
        print(f"seed derivations (functions that build a unit's seed): {len(built)}: {', '.join(built)}")
        print(f"raw reads of the run's seed in a unit's stages: {len(raw)}: {', '.join(raw)}")


if __name__ == "__main__":
    main()
