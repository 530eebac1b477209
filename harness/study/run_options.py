"""How `run` executes a grid config (what it computes is in the config): its shard, its workers or Ray
tasks, its threads; and the executor those settings give."""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass

from harness.core.plumbing.errors import SettingsError
from harness.core.plumbing.settings import Settings, option


@dataclass(kw_only=True)
class RunOptions(Settings):
    """How `tapt-bench run` executes a grid config (what it computes is in the config)."""

    config: str = option(help="grid config YAML, or a shipped config's name (demo, zero_shot, ...)")
    shard: str = option("0/1", "run the i-th of N deterministic slices of the units, as i/N")
    keep_adapters: bool = option(False, "keep each unit's adapters beside its results")
    overwrite: bool = option(False, "delete finished units made with other settings and recompute them")
    summary: bool = option(True, "print the summary table at the end (--no-summary: skip it)")
    workers: str = option(
        "auto",
        "worker processes on this machine, each loading the base once for all its units; auto: on a GPU, "
        "the first unit runs alone and as many units as its measured memory allows then run side by side "
        "(at most half the cores), on a CPU one unit at a time in this process",
    )
    threads: int = option(
        0,
        "torch threads per process; 0: $OMP_NUM_THREADS if set, else the cores no other program is using "
        "when each unit starts (at least 1), so that a run shares a machine without collapsing",
    )
    ray: bool = option(
        False,
        "run the units as Ray tasks (needs the extra: pip install -e '.[ray]'); the driver "
        "writes every result; --keep-adapters writes adapters on the workers' disks",
    )
    address: str | None = option(
        None, "with --ray: the cluster to join (e.g. auto); default: a local Ray instance"
    )
    until_mde: float = option(
        0.0,
        "run in rounds, one subsample of every task per method a round, and stop each method once its "
        "pooled MDE is at most this many points (never on its p-value), or at the config's subsamples; "
        "0: every unit at once",
    )
    cpus_per_unit: float = option(1.0, "with --ray: CPUs per unit (also its torch threads)")
    gpus_per_unit: str = option(
        "0",
        "with --ray: GPUs per unit (a fraction shares one GPU among units); auto: the first unit takes a "
        "whole GPU, the rest the fraction its measured peak memory needs",
    )

    MINIMUM = {"threads": 0, "cpus_per_unit": 0.0, "until_mde": 0.0}
    RAY_ONLY = ("address", "cpus_per_unit", "gpus_per_unit")

    def check(self) -> None:
        super().check()
        self.shard_pair()
        self.worker_count()
        self.gpu_share()
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        ray_only = ["--" + k.replace("_", "-") for k in self.RAY_ONLY if getattr(self, k) != defaults[k]]
        if ray_only and not self.ray:
            raise SettingsError(f"{', '.join(ray_only)}: used only with --ray; add --ray or drop them")
        if self.ray and self.worker_count() not in (None, 1):
            raise SettingsError("--workers and --ray are two ways to run units side by side; use one")
        if self.until_mde and self.shard_pair()[1] > 1:
            raise SettingsError(
                "--until-mde reads the summary of every unit between rounds, so one run holds them all: drop "
                "--shard (--workers and --ray still run a round's units side by side)"
            )
        if self.ray and self.threads:
            raise SettingsError(
                "--threads is for runs on this machine; under --ray each unit's torch threads are its "
                "--cpus-per-unit: set that instead"
            )

    def worker_count(self) -> int | None:
        """The workers asked for; None: auto."""
        return None if self.workers == "auto" else whole(self.workers, "--workers")

    def gpu_share(self) -> float | None:
        """The GPUs a Ray unit asks for; None: auto."""
        if self.gpus_per_unit == "auto":
            return None
        try:
            share = float(self.gpus_per_unit)
        except ValueError:
            share = -1.0
        if not 0 <= share < float("inf"):
            raise SettingsError(f"--gpus-per-unit must be auto or a number >= 0, got {self.gpus_per_unit!r}")
        return share

    def shard_pair(self) -> tuple[int, int]:
        try:
            i, count = (int(x) for x in self.shard.split("/"))
        except ValueError:
            raise SettingsError(f"--shard must look like i/N (e.g. 0/4), got {self.shard!r}") from None
        if count < 1:
            raise SettingsError(f"--shard {self.shard}: N must be at least 1 (i/N: the i-th of N slices)")
        if not 0 <= i < count:
            raise SettingsError(
                f"--shard {self.shard}: i must be 0 to N - 1 (for N = {count}: "
                f"{', '.join(f'{k}/{count}' for k in range(min(count, 4)))}{', ...' if count > 4 else ''})"
            )
        return i, count


def whole(text: str, name: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise SettingsError(f"{name} must be auto or a whole number >= 1, got {text!r}")
    return int(text)


@contextlib.contextmanager
def executor(opts: RunOptions):
    """Where the units run: Ray tasks, worker processes on this machine (their pool lives as long as the
    command: every cell and round reuses its loaded bases), or one by one in this process (None)."""
    if opts.ray:
        from harness.grid.execution.on_ray import executor as on_ray

        yield on_ray(address=opts.address, cpus_per_unit=opts.cpus_per_unit, gpus_per_unit=opts.gpu_share())
        return
    import torch

    workers, gpus = opts.worker_count(), torch.cuda.device_count()
    if workers == 1 or (workers is None and not gpus):
        yield None
        return
    from harness.grid.execution.pool import Pool

    with Pool(workers, opts.threads, gpus) as pool:
        yield pool.execute
