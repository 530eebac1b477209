"""Wall time of a grid config on a local Ray instance with 1 vs 2 units at a time, in one run.

Both legs run the same config into fresh output dirs, on a Ray instance holding this machine's CPUs:
one unit at a time with all CPUs as its torch threads (`--cpus-per-unit` = all), then two units at a
time with half each. On a GPU machine a third leg runs one unit per GPU (`--gpus-per-unit 1`). It also
times loading the base once against a unit, the cost a long-lived actor would save over a task.
Usage:
    python benchmarks/ray_workers.py [--config demo]
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

import harness
from harness import results
from harness.core.plumbing.settings import Settings, option, parse_script
from harness.grid.configuration import config, plan
from harness.grid.unit.base_model import loaded_base


@dataclass(kw_only=True)
class RayBenchArgs(Settings):
    """The config to time."""

    config: str = option("demo", "grid config file or shipped name")


def leg(
    ray, cfg: config.GridConfig, out: Path, cpus: int, gpus: float, per_unit_cpus: float, per_unit_gpus: float
):
    """(seconds, accuracies) of the whole config on a fresh Ray instance."""
    ray.init(num_cpus=cpus, num_gpus=gpus, include_dashboard=False, log_to_driver=False)
    try:
        run_cfg = cfg.replace(out=str(out))
        clock = time.perf_counter()
        harness.run(run_cfg, ray=True, cpus_per_unit=per_unit_cpus, gpus_per_unit=str(per_unit_gpus))
        seconds = time.perf_counter() - clock
    finally:
        ray.shutdown()
    acc = results.collect(out)
    return seconds, acc


def main() -> None:
    args = parse_script(RayBenchArgs, __doc__)
    import ray  # the optional extra: pip install -e '.[ray]'

    cfg = config.load_config(args.config)
    cpus, gpus = os.cpu_count() or 1, torch.cuda.device_count()
    print(
        f"config {args.config}: {len(plan.shard_keys(cfg))} units, flow {cfg.grid.flow}, "
        f"base {cfg.model.base}; {cpus} CPUs, {gpus} GPUs"
    )
    with tempfile.TemporaryDirectory() as tmp:
        one, acc_one = leg(ray, cfg, Path(tmp) / "one", cpus, 0, cpus, 0)
        two, acc_two = leg(ray, cfg, Path(tmp) / "two", cpus, 0, cpus / 2, 0)
        print(f"1 unit at a time ({cpus} threads): {one:7.1f} s")
        print(f"2 units at a time ({cpus / 2:g} threads each): {two:7.1f} s   ratio 1/2 = {one / two:.2f}")
        print(
            "accuracies equal across the legs: "
            f"{acc_one.reset_index(drop=True).equals(acc_two.reset_index(drop=True))}"
        )
        if gpus:
            gpu, _ = leg(ray, cfg, Path(tmp) / "gpu", cpus, gpus, max(1, cpus // gpus), 1)
            print(f"1 unit per GPU ({gpus} GPUs): {gpu:7.1f} s   ratio 1-CPU-unit/GPU = {one / gpu:.2f}")
        else:
            print("no GPU here: the GPU leg did not run")
    if cfg.grid.flow == "zero_shot":
        clock = time.perf_counter()
        loaded_base(cfg.model, cfg.form)
        load = time.perf_counter() - clock
        units = len(plan.shard_keys(cfg))
        print(
            f"loading the base once: {load:.1f} s, against {one / units:.1f} s per unit "
            f"({100 * load / (one / units):.1f}% of a unit, saved by a worker that keeps it loaded)"
        )


if __name__ == "__main__":
    main()
