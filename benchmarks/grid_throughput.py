"""The study's grids at the GPU's speed. The zero-shot flow (default): units of a Mistral-7B-shaped base
(random weights; the study's settings: QLoRA, paged_adamw_8bit, checkpointing, chat prompts, length 512,
mean_token, m = n = 100). The classifier flow (`--flow classifier`): units of Table 1's two backbones,
BERT-shaped and GPT-2-shaped (random weights; the settings of the shipped bert and gpt2 configs), drawn
from `--cells` in turn. Each grid's units run back to back by the chosen workers (default auto), then by
one worker, in one call, each leg a fresh `tapt-bench run`. Prints per leg the units, seconds a unit in
throughput (over the whole leg, and steady: from the finish at which every worker has finished one), the
stages' mean seconds a unit, GPU utilisation (mean and median of samples every half second, over the leg
and over its steady part), peak GPU memory and per process, the projected study grid (500 units zero-shot,
13,500 a backbone for Table 1); then the ratio, and whether both legs predicted the same on the units
they share. A leg still running at its deadline is stopped: its finished units count.
Usage, on a GPU:
    python benchmarks/grid_throughput.py --data-dir DIR [--units 24] [--baseline-units 2]
and its CPU part (a 2-layer model of the same tokenizer, plain LoRA, 2 workers), as the slow tier runs it:
    python benchmarks/grid_throughput.py --data-dir DIR --tiny
    python benchmarks/grid_throughput.py --data-dir DIR --flow classifier [--tiny]
The BERT-shaped model takes all-MiniLM-L6-v2's tokenizer (bert-base-uncased's vocabulary); the GPT-2-shaped
one SmolLM2's (49,152 tokens against GPT-2's 50,257): the only tokenizers on an offline machine.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from gpu_check import MISTRAL_7B, TINY, GpuSampler, random_model, shipped_config

from harness.core.engine import models
from harness.core.plumbing.settings import Settings, option, parse_script

GRID = 500  # the study's zero-shot grid: 25 tasks x 20 subsamples
STUDY_CELLS = ["50/50/100", "50/100/100", "50/200/50", "50/500/20", "100/50/100", "100/100/100", "100/200/50"]
STUDY_CELLS += ["100/500/20"]  # Table 1's cells (the bert and gpt2 configs): m/n/subsamples
TABLE_1 = 25 * sum(int(c.split("/")[2]) for c in STUDY_CELLS)  # units a backbone: 25 tasks
BACKBONES = {  # Table 1's backbones: the shipped config, the tokenizer's source, the shape
    "bert": (
        "bert",
        models.MINILM,
        dict(
            hidden_size=768,
            intermediate_size=3072,
            num_hidden_layers=12,
            num_attention_heads=12,
            max_position_embeddings=512,
        ),
    ),
    "gpt2": ("gpt2", models.SMOLLM2, dict(n_embd=768, n_layer=12, n_head=12, n_positions=1024)),
}
TINY_BACKBONES = {
    "bert": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2),
    "gpt2": dict(n_embd=32, n_layer=2, n_head=2, n_positions=256),
}


@dataclass(kw_only=True)
class ThroughputArgs(Settings):
    """What the benchmark runs."""

    config_from: str = option(
        models.SMOLLM2, "model dir or embedded name whose config and tokenizer it takes"
    )
    data_dir: str = option("", "folder of <slug>/data.parquet (default: the hub)")
    tasks: list[str] = option(["rotten_tomatoes", "ag_news"], "the tasks the units are drawn from, in turn")
    units: int = option(24, "units the chosen workers run")
    baseline_units: int = option(2, "units one worker runs (0: no such leg)")
    together: bool = option(False, "the chosen and one-worker legs score each unit's models together")
    alone_units: int = option(
        0, "units one worker runs scoring one model at a time (score_together false; 0: no such leg)"
    )
    workers: str = option("auto", "the chosen workers (--workers of tapt-bench run)")
    deadline: float = option(0.0, "seconds from the start after which a leg is stopped (0: none)")
    chosen_deadline: float = option(0.0, "seconds from the start after which the chosen leg is stopped")
    out: str = option("results/grid_throughput", "folder for the model and both legs' results")
    tiny: bool = option(False, "a 2-layer model, m 8, n 16, plain LoRA, 2 workers (the CPU part)")
    flow: str = option("zero_shot", "zero_shot, or classifier: Table 1's BERT- and GPT-2-shaped backbones")
    cells: list[str] = option(["50/50", "100/500"], "classifier: the cells m/n whose units run, in turn")

    MINIMUM = {"units": 1, "baseline_units": 0, "alone_units": 0, "deadline": 0.0, "chosen_deadline": 0.0}


def leg_config(a: ThroughputArgs, base: Path, units: int, out: Path, together: bool = False) -> Path:
    """The study's zero_shot config over `units` units of a.tasks (subsample 0 of each, then 1, ...)."""
    data = {"data_dir": str(Path(a.data_dir).resolve())} if a.data_dir else {}
    tiny = {"m": 8, "n": 16, "quantize": "none"} if a.tiny else {}
    subsamples = math.ceil(units / len(a.tasks))
    config = shipped_config(
        "zero_shot",
        out.with_suffix(".yaml"),
        base=str(base),
        tasks=a.tasks,
        subsamples=subsamples,
        out=str(out),
        score_together=together,
        **data,
        **tiny,
    )
    if a.tiny:  # bitsandbytes' 8-bit optimiser needs a GPU
        import yaml

        keys = yaml.safe_load(config.read_text())
        keys["method_settings"]["prompt-tapt"]["optim"] = "adamw_torch"
        config.write_text(yaml.safe_dump(keys))
    return config


def backbone(name: str, dest: Path, tiny: bool) -> Path:
    """A random-weight model of Table 1's backbone `name` (its masked-LM or causal-LM head), with the
    tokenizer of the embedded model it is made from."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, GPT2Config

    if (dest / "config.json").is_file():
        return dest
    _, source, shape = BACKBONES[name]
    path, tokenizer = models.resolve(source), models.tokenizer(models.resolve(source))
    shape = {**shape, **TINY_BACKBONES[name]} if tiny else shape
    torch.manual_seed(0)
    if name == "bert":
        config = AutoConfig.from_pretrained(path)
        for k, v in shape.items():
            setattr(config, k, v)
        model = AutoModelForMaskedLM.from_config(config)
    else:
        ids = dict(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
        model = AutoModelForCausalLM.from_config(GPT2Config(vocab_size=len(tokenizer), **ids, **shape))
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    return dest


def classifier_config(a: ThroughputArgs, name: str, base: Path, units: int, out: Path) -> Path:
    """The shipped config of backbone `name` over `units` units: a.cells in turn, each a.tasks in turn."""
    data = {"data_dir": str(Path(a.data_dir).resolve())} if a.data_dir else {}
    cells = list(dict.fromkeys("8/16" if a.tiny else c for c in a.cells))
    subsamples = math.ceil(math.ceil(units / len(cells)) / len(a.tasks))
    cells = [f"{c}/{subsamples}" for c in cells]
    keys = dict(base=str(base), tasks=a.tasks, cells=cells, out=str(out), **data)
    return shipped_config(BACKBONES[name][0], out.with_suffix(".yaml"), **keys)


def run_leg(name: str, config: Path, out: Path, workers: str, units: int, stop_at: float) -> dict:
    """One `tapt-bench run`, sampled; stopped at `stop_at` (time.time(), 0: never) with its finished units."""
    argv = [sys.executable, "-m", "harness.cli", "run", "--config", str(config), "--workers", workers]
    argv += ["--no-summary", "--overwrite"]
    with GpuSampler() as gpu:
        start = time.time()
        errors = out.with_suffix(".stderr")
        with open(errors, "w") as stderr:
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
        while proc.poll() is None and not (stop_at and time.time() > stop_at):
            time.sleep(0.5)
        stopped = proc.poll() is None
        if stopped:  # the run and its workers
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        err = errors.read_text()
        end = time.time()
    records = sorted(out.rglob("units/*.json"), key=lambda p: p.stat().st_mtime)
    finishes = [p.stat().st_mtime for p in records]
    row = {"leg": name, "workers": workers, "rc": proc.returncode, "stopped": stopped, "units": len(records)}
    row |= {"wall": end - start, "problem": "" if stopped or not proc.returncode else err.strip()[-300:]}
    logs = sorted(out.rglob("logs/*.log"))
    text = logs[-1].read_text() if logs else ""
    warm = warmed(records, text)
    if len(finishes) - warm >= 2:  # every worker has finished a unit: its base loaded, its kernels warm
        row["steady"] = (finishes[-1] - finishes[warm]) / (len(finishes) - 1 - warm)
        steady_util = gpu.between(finishes[warm], finishes[-1])
        row["steady_util"] = statistics.mean(steady_util) if steady_util else None
    if records:
        row["per_unit"] = (finishes[-1] - start) / len(records)
        seconds = pd.DataFrame([json.loads(p.read_text())["seconds"] for p in records])
        stages = ("score", "train") if any(c.startswith("score") for c in seconds) else seconds.columns
        row["stages"] = {stage: seconds.filter(like=stage).sum(axis=1).mean() for stage in stages}
    if gpu.util:
        row |= {"util": statistics.mean(gpu.util), "util_median": statistics.median(gpu.util)}
        workers = {pid: gib for pid, gib in gpu.processes.items() if pid != str(os.getpid())}  # not this one
        row |= {"memory": max(gpu.memory), "per_process": max(workers.values(), default=None)}
        row["processes"] = len(workers)
    sized = re.search(r"workers auto: .*", text)
    row["sizing"] = sized.group(0) if sized else ""
    return row


def warmed(records: list[Path], log: str) -> int:
    """The index, in finishing order, of the first unit finished once every worker has finished one (0
    with one worker): the steady part of a leg starts there."""
    worker = {
        (slug, int(k)): w for slug, k, w in re.findall(r"(\S+) subsample (\d+): start in worker (\d+)", log)
    }
    seen, every = set(), set(worker.values())
    for i, path in enumerate(records):
        seen.add(worker.get((path.parent.parent.name, int(path.stem)), "0"))
        if seen >= every:
            return i
    return len(records)


def predictions(out: Path) -> pd.DataFrame:
    """Every unit's class probabilities and prediction per test document and condition (`task`: its task
    folder under the leg's, the cell and model included)."""
    frames = [
        pd.read_parquet(path).assign(task=str(path.parent.parent.relative_to(out)))
        for path in out.rglob("units/*.parquet")
    ]
    if not frames:
        return pd.DataFrame()
    frame = pd.concat(frames)
    return frame.assign(pred=[int(max(range(len(p)), key=p.__getitem__)) for p in frame["probs"]])


def agreement(one: Path, many: Path) -> str:
    """How alike the two legs' records are on the units both finished: predictions and probabilities."""
    a, b = predictions(one), predictions(many)
    if a.empty or b.empty:
        return "no unit in both legs"
    both = a.merge(b, on=["task", "subsample", "row", "condition"], suffixes=("_one", "_many"))
    if both.empty:
        return "no unit in both legs"
    same = (both["pred_one"] == both["pred_many"]).mean()
    gap = max(abs(x - y) for p, q in zip(both["probs_one"], both["probs_many"]) for x, y in zip(p, q))
    return (
        f"units in both legs: {both.groupby(['task', 'subsample']).ngroups}, documents x conditions "
        f"{len(both)}: the same prediction on {100 * same:.1f}%, largest class-probability gap {gap:.2e}"
    )


def show(row: dict) -> str:
    util = f"{row['util']:.0f}/{row['util_median']:.0f}" if "util" in row else "-"
    steady_util = f"{row['steady_util']:.0f}" if row.get("steady_util") is not None else "-"
    memory = f"{row['memory']:.1f}" if "memory" in row else "-"
    per_process = f"{row['per_process']:.1f} x {row['processes']}" if row.get("per_process") else "-"
    stages = " ".join(f"{k} {v:.1f}" for k, v in row.get("stages", {}).items())
    steady = row.get("steady", float("nan"))
    return (
        f"{row['leg']:10} {row['workers']:>7} {row['units']:>5} {row['wall']:>7.0f} "
        f"{row.get('per_unit', float('nan')):>8.1f} {steady:>7.1f} {3600 / steady if steady else 0:>7.0f} "
        f"{util:>9} {steady_util:>6} {memory:>8} {per_process:>12}  {stages}"
        + (" (stopped at the deadline)" if row["stopped"] else "")
        + (f"  FAILED: {row['problem']}" if row["problem"] else "")
    )


def grids(a: ThroughputArgs, out: Path) -> list[tuple[str, int, object]]:
    """(name, the study's units of that grid, leg config maker) for each grid the benchmark runs."""
    if a.flow == "classifier":
        made = {name: backbone(name, out / f"{name}_model", a.tiny) for name in BACKBONES}
        return [
            (
                name,
                TABLE_1,
                lambda units, results, together, name=name: classifier_config(
                    a, name, made[name], units, results
                ),
            )
            for name in BACKBONES
        ]
    source = models.resolve(a.config_from)
    base = random_model(source, out / "model", TINY if a.tiny else MISTRAL_7B, mistral=not a.tiny)
    return [
        ("zero_shot", GRID, lambda units, results, together: leg_config(a, base, units, results, together))
    ]


def main() -> None:
    a = parse_script(ThroughputArgs, __doc__)
    start, out = time.time(), Path(a.out)
    gpu = torch.cuda.is_available()
    print(f"device {torch.cuda.get_device_name() if gpu else 'cpu'}, torch {torch.__version__}", flush=True)
    made = grids(a, out)
    if (
        gpu
    ):  # the models made here are saved: give their memory back, so the legs' workers alone hold the GPU's
        torch.cuda.empty_cache()
    print(f"random-weight model(s) made in {time.time() - start:.0f} s", flush=True)
    at = [start + d if d else 0.0 for d in (a.chosen_deadline or a.deadline, a.deadline)]
    failed = [run_grid(a, *grid, out / grid[0] if len(made) > 1 else out, at) for grid in made]
    sys.exit(1 if any(failed) else 0)


def run_grid(a: ThroughputArgs, grid_name: str, study_units: int, config_of, folder: Path, at: list) -> bool:
    """One grid's legs (chosen workers, one worker, one model at a time), printed; whether one failed."""
    legs = [("chosen", "2" if a.tiny and a.workers == "auto" else a.workers, a.units, at[0], a.together)]
    legs += [("one", "1", a.baseline_units, at[1], a.together)] if a.baseline_units else []
    legs += [("alone", "1", a.alone_units, at[1], False)] if a.alone_units else []
    rows = []
    for name, workers, units, stop_at, together in legs:
        results = folder / name
        rows.append(run_leg(name, config_of(units, results, together), results, workers, units, stop_at))
        print(json.dumps(rows[-1]), flush=True)
    print(f"\n{grid_name}:")
    print(
        f"{'leg':10} {'workers':>7} {'units':>5} {'wall s':>7} {'s/unit':>8} {'steady':>7} {'units/h':>7} "
        f"{'GPU %':>9} {'steady':>6} {'peak GiB':>8} {'per process':>12}  mean s a unit by stage"
    )
    for row in rows:
        print(show(row))
        if row["sizing"]:
            print(f"  {row['sizing']}")
    chosen = rows[0]
    if len(rows) > 1 and rows[1].get("steady") and chosen.get("steady"):
        ratio = rows[1]["steady"] / chosen["steady"]
        hours = (chosen["wall"] + (study_units - chosen["units"]) * chosen["steady"]) / 3600
        print(
            f"steady throughput, chosen over one worker: {ratio:.2f}x; the {study_units}-unit grid at the "
            f"chosen rate: {hours:.2f} h (one worker: {study_units * rows[1]['steady'] / 3600:.2f} h)"
        )
    if a.baseline_units:
        print("chosen against one worker:", agreement(folder / "one", folder / "chosen"))
    if a.baseline_units and a.alone_units:  # the same units, scored together and one model at a time
        print(
            "one worker, scored together against one model at a time:",
            agreement(folder / "alone", folder / "one"),
        )
    return any(r["problem"] or not r["units"] for r in rows)


if __name__ == "__main__":
    main()
