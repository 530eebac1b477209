"""The study's zero-shot grid at the GPU's speed: units of a Mistral-7B-shaped base (random weights; the
study's settings: QLoRA, paged_adamw_8bit, checkpointing, chat prompts, length 512, mean_token, m = n =
100) run back to back by the chosen workers (default auto), then by one worker, in one call, each leg a
fresh `tapt-bench run`. Prints per leg the units, seconds a unit in throughput (over the whole leg, and
steady: over its second half of finishes), the stages' mean seconds a unit, GPU utilisation (mean and
median of samples every half second, over the leg and over its steady part), peak GPU memory and per
process, the projected 500-unit grid; then the ratio, and whether both legs predicted the same on the
units they share. A leg still running at its deadline is stopped: its finished units count.
Usage, on a GPU:
    python benchmarks/grid_throughput.py --data-dir DIR [--units 24] [--baseline-units 2]
and its CPU part (a 2-layer model of the same tokenizer, plain LoRA, 2 workers), as the slow tier runs it:
    python benchmarks/grid_throughput.py --data-dir DIR --tiny
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

from harness.core import models
from harness.core.settings import Settings, option, parse_script

GRID = 500  # the study's zero-shot grid: 25 tasks x 20 subsamples


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
        row["stages"] = {stage: seconds.filter(like=stage).sum(axis=1).mean() for stage in ("score", "train")}
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
    """Every unit's class probabilities and prediction per test document and condition."""
    frames = [
        pd.read_parquet(path).assign(task=path.parent.parent.name) for path in out.rglob("units/*.parquet")
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


def main() -> None:
    a = parse_script(ThroughputArgs, __doc__)
    start, out = time.time(), Path(a.out)
    gpu = torch.cuda.is_available()
    print(f"device {torch.cuda.get_device_name() if gpu else 'cpu'}, torch {torch.__version__}", flush=True)
    source = models.resolve(a.config_from)
    base = random_model(source, out / "model", TINY if a.tiny else MISTRAL_7B, mistral=not a.tiny)
    if gpu:  # the model made here is saved: give its memory back, so the legs' workers alone hold the GPU's
        torch.cuda.empty_cache()
    print(f"random-weight model made in {time.time() - start:.0f} s", flush=True)
    at = [start + d if d else 0.0 for d in (a.chosen_deadline or a.deadline, a.deadline)]
    legs = [("chosen", "2" if a.tiny and a.workers == "auto" else a.workers, a.units, at[0], a.together)]
    legs += [("one", "1", a.baseline_units, at[1], a.together)] if a.baseline_units else []
    legs += [("alone", "1", a.alone_units, at[1], False)] if a.alone_units else []
    rows = []
    for name, workers, units, stop_at, together in legs:
        results = out / name
        config = leg_config(a, base, units, results, together)
        rows.append(run_leg(name, config, results, workers, units, stop_at))
        print(json.dumps(rows[-1]), flush=True)
    print(
        f"\n{'leg':10} {'workers':>7} {'units':>5} {'wall s':>7} {'s/unit':>8} {'steady':>7} {'units/h':>7} "
        f"{'GPU %':>9} {'steady':>6} {'peak GiB':>8} {'per process':>12}  mean s a unit by stage"
    )
    for row in rows:
        print(show(row))
        if row["sizing"]:
            print(f"  {row['sizing']}")
    chosen = rows[0]
    if len(rows) > 1 and rows[1].get("steady") and chosen.get("steady"):
        ratio = rows[1]["steady"] / chosen["steady"]
        grid = chosen["wall"] + (GRID - chosen["units"]) * chosen["steady"]
        print(
            f"steady throughput, chosen over one worker: {ratio:.2f}x; the {GRID}-unit grid at the chosen "
            f"rate: {grid / 3600:.2f} h (one worker: {GRID * rows[1]['steady'] / 3600:.2f} h)"
        )
    if a.baseline_units:
        print("chosen against one worker:", agreement(out / "one", out / "chosen"))
    if a.baseline_units and a.alone_units:  # the same units, scored together and one model at a time
        print(
            "one worker, scored together against one model at a time:", agreement(out / "alone", out / "one")
        )
    sys.exit(1 if any(r["problem"] or not r["units"] for r in rows) else 0)


if __name__ == "__main__":
    main()
