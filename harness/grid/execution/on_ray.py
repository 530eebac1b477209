"""The grid's units as Ray tasks, on a Ray cluster (`--address`) or on a local Ray instance.

One Ray task per unit, rather than one long-lived actor per GPU that pulls units: a worker process
keeps the zero-shot base loaded across the units it runs (base_model.loaded_base, and `max_calls=0` keeps
GPU workers alive too), so a task reloads nothing an actor would keep; and Ray itself retries a task
whose worker died, where a dead actor's pulled units would need our own bookkeeping. A task returns
its unit to the driver, which alone writes results, atomically, exactly as a local run does: workers
need no shared filesystem, a retried or duplicated task is written once, and a killed driver loses
only the units in flight; the same command resumes.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator

from harness.core.plumbing.errors import UserError
from harness.grid.execution.pool import fits
from harness.grid.execution.worker_messages import Done, Memory, measure
from harness.grid.unit import flow
from harness.grid.unit.unit_plan import UnitPlan
from harness.grid.unit.unit_record import UnitRecord

log = logging.getLogger("tapt_bench.grid")

RETRIES = 3  # Ray reruns a unit whose worker process died this many times before the run fails


def ray_module():
    try:
        import ray
    except ImportError:
        raise UserError(
            "--ray needs Ray, an optional extra: pip install -e '.[ray]' (or pip install 'tapt-bench[ray]')"
        ) from None
    return ray


def computed_on_ray(plan: UnitPlan, keep_adapters: bool, threads: int, alone: bool = False) -> Done:
    """One unit in a Ray worker, with its GPU memory (execution/pool.py measure; `alone`: the only unit on
    its GPU); its log lines go to stderr, which Ray forwards to the driver's run log."""
    import torch

    torch.set_num_threads(threads)
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    log.info("%s subsample %d: start in worker pid %d", *plan.key, os.getpid())
    record = flow.compute(plan, keep_adapters)  # the plan travels as it is; its plug-ins are found by name
    return Done(0, record, measure(alone))


def gpu_fraction(memory: Memory) -> float:
    """The share of a GPU a unit asks for from its measured memory: 1/k, k the units that fit in one card
    with pool.MARGIN left free (Ray packs fractions that add up to 1 best)."""
    per_card, _, _ = fits(memory.peak + (memory.outside or 0.0), memory.total, cores=2**30)
    return 1.0 / per_card


def executor(*, address: str | None, cpus_per_unit: float, gpus_per_unit: float | None):
    """A `run.run` executor that runs the units as Ray tasks and yields each as it finishes.

    Connects to `address` (a running cluster, e.g. `auto`), else to the Ray instance this process
    already started, else starts a local one on this machine's CPUs and GPUs. `gpus_per_unit` None
    (auto): on a cluster with GPUs the first unit runs alone on a whole GPU, and every later unit asks
    for the share of a GPU its measured memory needs (gpu_fraction); without GPUs, none."""
    ray = ray_module()
    share = {"gpus": gpus_per_unit}

    def execute(pending: list[UnitPlan], keep_adapters: bool) -> Iterator[UnitRecord]:
        if not pending:
            return
        if not ray.is_initialized():
            # a worker's own output (the Trainer's step lines) stays in Ray's worker logs: forwarded, it
            # reached the terminal after the run's log had closed; a failure comes back as its error
            ray.init(address=address, log_to_driver=False)
            log.info("Ray workers' own output: the worker logs of Ray's session (ray.init's temp folder)")
        if share["gpus"] is None and not ray.cluster_resources().get("GPU"):
            share["gpus"] = 0.0
        threads, todo = max(1, int(cpus_per_unit)), list(pending)

        def submit(plans: list[UnitPlan], gpus: float, alone: bool = False) -> dict:
            task = ray.remote(num_cpus=cpus_per_unit, num_gpus=gpus, max_retries=RETRIES, max_calls=0)
            return {task(computed_on_ray).remote(p, keep_adapters, threads, alone): p.key for p in plans}

        running = submit(todo[:1], 1.0, alone=True) if share["gpus"] is None else submit(todo, share["gpus"])
        try:
            while running:
                done, _ = ray.wait(list(running), num_returns=1)
                slug, k = running.pop(done[0])
                try:
                    reply = ray.get(done[0])
                except ray.exceptions.RayError as err:
                    raise UserError(
                        f"unit {slug} subsample {k} failed on Ray ({type(err).__name__}): {err}\n"
                        "Finished units are kept; the same command reruns the rest."
                    ) from err
                if share["gpus"] is None:  # the first unit, alone on its GPU: the rest ask for its share
                    share["gpus"] = gpu_fraction(reply.memory) if reply.memory else 1.0
                    log.info("--gpus-per-unit auto: each unit asks for %.3g of a GPU", share["gpus"])
                    running |= submit(todo[1:], share["gpus"])
                yield reply.record
        finally:
            for ref in running:  # stop what is still queued or running: a rerun starts it again
                ray.cancel(ref, force=True)

    return execute
