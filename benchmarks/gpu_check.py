"""Where users run it, in one command: random-weight models of the embedded model's shape (no download),
then, each as the user types it, the demo; the four methods with the leak, the stream, the exposure test
and CoDeC (k 1); `calibrate --train false` on their records; `train` and the design's `lm_eval` line;
and, on a GPU, a Mistral-7B-shaped zero-shot unit at the study's m = n = 100 (QLoRA) with its stage
times. Every unit's adapted conditions must have moved (their record's `moved`). Prints one table (GPU
utilisation sampled every half second by nvidia-smi, and its peak memory) and exits non-zero on any
failure or any condition that did not move. Usage, on a GPU machine (about 5 minutes):
    python benchmarks/gpu_check.py --data-dir DIR [--config-from DIR]
and its CPU part, as CI runs it (a 2-layer model of the same tokenizer, no 7B unit):
    python benchmarks/gpu_check.py --data-dir DIR --tiny
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from harness.core.engine import models, weights
from harness.core.plumbing.settings import Settings, option, parse_script


@dataclass(kw_only=True)
class GpuCheckArgs(Settings):
    """What the check runs on."""

    config_from: str = option(
        models.SMOLLM2, "model dir or embedded name whose config and tokenizer it takes"
    )
    data_dir: str = option("", "folder of <slug>/data.parquet (default: the hub)")
    task: str = option("rotten_tomatoes", "the task every step runs")
    out: str = option("results/gpu_check", "folder for the random models and every step's results")
    tiny: bool = option(False, "2 layers of width 64 instead of the embedded shape (the CPU part CI runs)")
    big: bool = option(True, "the Mistral-7B-shaped unit (on a GPU only)")


MISTRAL_7B = dict(
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
)
TINY = dict(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
)


def random_model(source: str, dest: Path, shape: dict | None = None, mistral: bool = False) -> Path:
    """A model dir with random weights: `source`'s config (with `shape` over it) and tokenizer."""
    from transformers import AutoConfig, AutoModelForCausalLM, MistralConfig

    if (dest / "config.json").is_file():
        return dest
    config = AutoConfig.from_pretrained(source)
    if mistral:
        keep = ("vocab_size", "bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings")
        config = MistralConfig(**{k: getattr(config, k) for k in keep}, **(shape or {}))
    else:
        for k, v in (shape or {}).items():
            setattr(config, k, v)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    with torch.device(models.device()):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.save_pretrained(dest)
    models.tokenizer(source).save_pretrained(dest)
    return dest


class GpuSampler:
    """nvidia-smi's utilisation and memory every `every` seconds while a step runs, each sample with its
    time, and each process's largest memory (empty without a GPU)."""

    def __init__(self, every: float = 0.5) -> None:
        self.every = every
        self.times: list[float] = []
        self.util: list[float] = []
        self.memory: list[float] = []
        self.processes: dict[str, float] = {}  # pid: its largest GiB
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        query = ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits"]
        apps = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
        while not self._stop.wait(self.every):
            try:
                util, mem = (
                    subprocess.run(query, capture_output=True, text=True).stdout.split("\n")[0].split(",")
                )
                listed = subprocess.run(apps, capture_output=True, text=True).stdout.splitlines()
            except (OSError, ValueError):
                return
            self.times.append(time.time())
            self.util.append(float(util))
            self.memory.append(float(mem) / 1024)
            for line in listed:
                pid, _, used = line.partition(",")
                if used.strip().isdigit():
                    self.processes[pid] = max(self.processes.get(pid, 0.0), float(used) / 1024)

    def between(self, start: float, end: float) -> list[float]:
        """The utilisation samples taken from `start` to `end` (times from time.time())."""
        return [u for t, u in zip(self.times, self.util) if start <= t <= end]

    def __enter__(self):
        if shutil.which("nvidia-smi"):
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()


def units_moved(out: Path) -> tuple[int, list[str], list[str]]:
    """(units read, conditions that did not move, conditions whose method learned from no document):
    every adapted condition of every unit under `out`. Learning from nothing is the method's own account
    (test-time RL on random weights: no sample names a class), shown but not failed."""
    stuck, idle, units = [], [], 0
    for path in sorted(out.rglob("units/*.json")):
        unit, units = json.loads(path.read_text()), units + 1
        where = f"{path.parent.parent.parent.name}/{path.parent.parent.name} {path.stem}"
        for cond, rec in unit["training"].items():
            for i, part in enumerate(rec.get("per_chunk", [rec])):
                moved, name = part.get("moved"), cond + (f" chunk {i + 1}" if "per_chunk" in rec else "")
                if moved is not None and not weights.did_not_move(moved) and not moved.get("unmoved_layers"):
                    continue  # stricter than the run's refusal: every LoRA layer must have moved
                (idle if part.get("learned_from") == 0 else stuck).append(f"{where} {name}: {moved}")
    return units, stuck, idle


@dataclass
class Step:
    name: str
    argv: list[str]
    out: Path | None = None  # a results folder whose units must all have moved


def run_step(step: Step) -> dict:
    with GpuSampler() as gpu:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", *step.argv], capture_output=True, text=True)
        seconds = time.perf_counter() - start
    row = {
        "step": step.name,
        "rc": done.returncode,
        "seconds": seconds,
        "units": "",
        "problem": "",
        "idle": 0,
    }
    if gpu.util:
        row |= {"util": statistics.mean(gpu.util), "util_max": max(gpu.util), "memory": max(gpu.memory)}
    if done.returncode:
        row["problem"] = (done.stderr.strip().splitlines() or ["(no stderr)"])[-1][:160]
    elif step.out is not None:
        units, stuck, idle = units_moved(step.out)
        row["units"], row["idle"] = units, len(idle)
        if not units or stuck:
            row["problem"] = "; ".join(stuck[:3]) or "no unit written"
    return row


def shipped_config(name: str, dest: Path, **keys) -> Path:
    """A shipped config with `keys` over it, written as its own file (run and calibrate read the same)."""
    import yaml

    from harness.grid.configuration.config import config_path

    config = yaml.safe_load(config_path(name).read_text()) | keys
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(yaml.safe_dump(config))
    return dest


def steps(a: GpuCheckArgs, small: Path, big: Path | None) -> list[Step]:
    out = Path(a.out)
    data = {"data_dir": str(Path(a.data_dir).resolve())} if a.data_dir else {}  # a config's own folder
    flags = ["--data-dir", a.data_dir] if a.data_dir else []
    cell = {"m": 4, "n": 6} if a.tiny else {}
    keys = {"base": str(small), "tasks": [a.task], "subsamples": 1, **cell, **data}
    demo = shipped_config("demo", out / "demo.yaml", **keys, out=str(out / "demo"))
    each = shipped_config("methods", out / "methods.yaml", **keys, out=str(out / "methods"))
    adapter, n = out / "adapter", str(cell.get("n", 8))
    metadata = json.dumps({"n": int(n), "subsample": 0, **data})
    todo = [
        Step("demo", ["harness.cli", "run", "--config", str(demo), "--overwrite"], out / "demo"),
        Step(
            "four methods: leak, stream, exposure, CoDeC k 1",
            ["harness.cli", "run", "--config", str(each), "--overwrite"],
            out / "methods",
        ),
        Step(
            "contamination calibrate --no-train",
            ["harness.cli", *"contamination calibrate --config".split(), str(each), "--no-train"]
            + ["--modes", "padding"],
        ),
        Step(
            "train (prompt TAPT on test)",
            ["harness.cli", "train", "--task", a.task, "--split", "test", "--n", n, "--m", "4"]
            + ["--base", str(small), *"--quantize none --epochs 2 --lr 0.002".split(), *flags]
            + ["--out", str(adapter), "--overwrite"],
        ),
        Step(
            "lm_eval --model hf --model_args peft=ADAPTER",
            ["lm_eval", "--model", "hf", "--model_args", f"peft={adapter}", "--tasks", f"tapt_{a.task}"]
            + ["--metadata", metadata, "--device", str(models.device())],
        ),
    ]
    if big is not None:
        unit = shipped_config(
            "zero_shot",
            out / "zero_shot.yaml",
            base=str(big),
            tasks=[a.task],
            subsamples=1,
            **data,
            out=str(out / "zero_shot"),
        )
        todo.append(
            Step(
                "Mistral-7B-shaped zero-shot unit, m = n = 100, QLoRA",
                ["harness.cli", "run", "--config", str(unit), "--overwrite"],
                out / "zero_shot",
            )
        )
    return todo


def stage_seconds(out: Path) -> str:
    """The big unit's seconds by stage, from its record."""
    units = sorted(out.rglob("units/*.json"))
    if not units:
        return ""
    seconds = json.loads(units[0].read_text())["seconds"]
    return ", ".join(f"{k} {v:.1f}" for k, v in seconds.items())


def checked(a: GpuCheckArgs) -> str:
    """The model folder whose config and tokenizer the check takes, once it and the task are known to
    exist: before any step runs, one line naming the flag."""
    from harness.core.plumbing.errors import UserError
    from harness.tasks.protocol import find_spec

    try:
        source = models.resolve(a.config_from)
        models.check_base(source, "--config-from")
    except UserError as err:
        sys.exit(f"error: {str(err).splitlines()[0]}")
    try:
        find_spec(a.task)
    except UserError:
        sys.exit(f"error: --task {a.task!r} is not a shipped task; `tapt-bench tasks list` names them")
    return source


def main() -> None:
    a = parse_script(GpuCheckArgs, __doc__)
    out = Path(a.out)
    source = checked(a)
    gpu = torch.cuda.is_available()
    print(
        f"device {models.device()}{f' ({torch.cuda.get_device_name()})' if gpu else ''}, "
        f"torch {torch.__version__}"
    )
    start = time.perf_counter()
    small = random_model(source, out / ("tiny" if a.tiny else "random"), TINY if a.tiny else None)
    big = random_model(source, out / "mistral_7b_shape", MISTRAL_7B, mistral=True) if a.big and gpu else None
    print(f"random-weight models made in {time.perf_counter() - start:.0f} s")
    rows = []
    for step in steps(a, small, big):
        rows.append(run_step(step))
        r = rows[-1]
        print(f"  {r['step']}: rc {r['rc']}, {r['seconds']:.0f} s {r['problem']}", flush=True)
    print(f"\n{'step':52} {'rc':>3} {'s':>6} {'units':>5} {'idle':>4} {'GPU %':>9} {'peak GiB':>8}  problem")
    for r in rows:
        util = f"{r['util']:.0f}/{r['util_max']:.0f}" if "util" in r else "-"
        memory = f"{r['memory']:.1f}" if "memory" in r else "-"
        print(
            f"{r['step']:52} {r['rc']:>3} {r['seconds']:>6.0f} {r['units']!s:>5} {r['idle']:>4} {util:>9} "
            f"{memory:>8}  "
            f"{r['problem'] or 'ok'}"
        )
    print("idle: adapted models whose method learned from no document by its own record (not a failure)")
    if big is not None:
        print(f"the 7B-shaped unit's stages (s): {stage_seconds(out / 'zero_shot')}")
    failed = [r["step"] for r in rows if r["rc"] or r["problem"]]
    print(
        f"\n{len(rows) - len(failed)} of {len(rows)} steps passed"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
