"""What a run and the processes that compute its units say to each other (execution/pool.py, on_ray.py):
the unit handed out (`Job`), the answer (`Done` with the unit's record and its GPU memory, or `Failed`),
and the memory a worker measures over a unit (`Memory`, `measure`)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.grid.unit.unit_plan import UnitKey, UnitPlan
from harness.grid.unit.unit_record import UnitRecord

GIB = 2**30


@dataclass(frozen=True)
class Memory:
    """One unit's GPU memory as its worker measured it, in GiB: the allocator's peak over the unit, what
    the process holds outside the allocator (only where the worker ran alone: None otherwise), the card's
    total and its name."""

    peak: float
    outside: float | None
    total: float
    name: str


@dataclass(frozen=True)
class Job:
    """A unit handed to a worker: its plan as the run resolved it, whether to keep its adapters, the torch
    threads it may use, the run's log file (where the worker's printing goes), and whether it runs alone
    on the GPU (its memory outside the allocator is then read)."""

    plan: UnitPlan
    keep_adapters: bool
    threads: int
    logfile: str | None
    alone: bool


@dataclass(frozen=True)
class Done:
    """A worker's finished unit, and its GPU memory (None on a CPU)."""

    worker: int
    record: UnitRecord
    memory: Memory | None


@dataclass(frozen=True)
class Failed:
    """A worker's unit that raised: whether it ran out of GPU memory, the error and its traceback."""

    worker: int
    key: UnitKey
    oom: bool
    error: str
    trace: str


def measure(alone: bool) -> Memory | None:
    """This process's GPU memory over the unit just run (None on a CPU); resets the peak for the next."""
    import torch

    if not torch.cuda.is_available():
        return None
    free, total = torch.cuda.mem_get_info()
    outside = (total - free - torch.cuda.memory_reserved()) / GIB if alone else None
    peak = torch.cuda.max_memory_reserved() / GIB
    torch.cuda.reset_peak_memory_stats()
    return Memory(peak, outside, total / GIB, torch.cuda.get_device_name())
