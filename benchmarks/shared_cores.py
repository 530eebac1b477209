"""A small grid on a machine another program shares: alone, beside a single-threaded busy loop, and
beside a second torch process (a transformer layer's training steps, torch's default threads), with
torch's threads as before (one per core, torch's default: `--threads N`) and as now (the cores free
when each unit starts: `--threads 0`). Each leg runs the grid in a fresh output dir; its slowdown is
its seconds over the same variant's seconds alone in the same repeat. Usage:
    python benchmarks/shared_cores.py [--config demo --tasks ag_news --subsamples 1 --repeats 2 --timeout S]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from harness import results
from harness.core.plumbing.settings import Settings, option, parse_script

NEIGHBOURS = {
    "alone": None,
    "busy loop": "while True: pass",
    "torch": (
        "import torch\n"
        "layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)\n"
        "opt = torch.optim.AdamW(layer.parameters())\n"
        "x = torch.randn(8, 64, 512)\n"
        "while True:\n"
        "    opt.zero_grad(); layer(x).square().mean().backward(); opt.step()\n"
    ),
}


@dataclass(kw_only=True)
class SharedBenchArgs(Settings):
    """The grid to run and how often."""

    SMOKE = {"repeats": 1, "subsamples": 1, "neighbours": ["alone", "busy loop"]}

    config: str = option("demo", "grid config file or shipped name")
    tasks: list[str] = option(["ag_news"], "its tasks")
    subsamples: int = option(1, "subsamples per task")
    base: str | None = option(None, "another base model (default: the config's)")
    data_dir: str | None = option(None, "offline data dir (as tapt-bench run --data-dir)")
    repeats: int = option(2, "how many times each leg runs (the ratios move between repeats)")
    neighbours: list[str] = option(list(NEIGHBOURS), f"which of {list(NEIGHBOURS)} to run beside")
    timeout: float | None = option(None, "seconds after which a leg is stopped and shown as '>' that")


def leg(a: SharedBenchArgs, out: Path, threads: int, neighbour: str) -> tuple[float, pd.DataFrame | None]:
    """(seconds, accuracies) of the grid with `--threads threads`, beside `neighbour`; (timeout, None)
    where it ran past `a.timeout`."""
    flags = ["--tasks", *a.tasks, "--subsamples", str(a.subsamples), "--threads", str(threads)]
    flags += ["--base", a.base] if a.base else []
    flags += ["--data-dir", a.data_dir] if a.data_dir else []
    command = [sys.executable, "-m", "harness.cli", "run", "--config", a.config, "--out", str(out)]
    other = NEIGHBOURS[neighbour] and subprocess.Popen([sys.executable, "-c", NEIGHBOURS[neighbour]])
    try:
        time.sleep(3 if other else 0)  # the neighbour running (torch imported) before the grid starts
        clock = time.perf_counter()
        done = subprocess.run(
            [*command, *flags, "--no-summary"], capture_output=True, text=True, timeout=a.timeout
        )
        seconds = time.perf_counter() - clock
    except subprocess.TimeoutExpired:
        return a.timeout, None
    finally:
        if other:
            other.kill()
            other.wait()
    if done.returncode:
        raise SystemExit(f"the grid failed:\n{done.stderr[-3000:]}")
    return seconds, results.collect(out)


def main() -> None:
    a = parse_script(SharedBenchArgs, __doc__)
    every_core = torch.get_num_threads()
    variants = {f"before (--threads {every_core})": every_core, "now (--threads 0)": 0}
    print(
        f"config {a.config}, tasks {a.tasks}, {a.subsamples} subsample(s); torch's default here: "
        f"{every_core} threads; {a.repeats} repeat(s)"
    )
    heads = " ".join(f"{f's (rep {r + 1})':>10} {'ratio':>6}" for r in range(a.repeats))
    print(f"{'variant':22} {'neighbour':10} {heads}")
    accuracies = []
    with tempfile.TemporaryDirectory() as tmp:
        rows = {}
        for r in range(a.repeats):
            for name, threads in variants.items():
                for neighbour in a.neighbours:
                    out = Path(tmp) / f"{r}_{threads}_{neighbour.replace(' ', '_')}"
                    seconds, acc = leg(a, out, threads, neighbour)
                    rows.setdefault((name, neighbour), []).append((seconds, acc is None))
                    if acc is not None:
                        accuracies.append(acc.reset_index(drop=True))
        for (name, neighbour), legs in rows.items():
            alone = [s for s, _ in rows.get((name, "alone"), legs)]
            cells = " ".join(
                f"{'>' if stopped else ' '}{s:9.1f} {'>' if stopped else ' '}{s / base:5.2f}"
                for (s, stopped), base in zip(legs, alone)
            )
            print(f"{name:22} {neighbour:10} {cells}")
    same = all(acc.equals(accuracies[0]) for acc in accuracies)
    stopped = sum(stop for legs in rows.values() for _, stop in legs)
    print(f"accuracies equal across every leg that finished: {same}; legs stopped at the timeout: {stopped}")


if __name__ == "__main__":
    main()
