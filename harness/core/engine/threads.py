"""How many threads torch gets on a machine that other programs share.

torch takes one intra-op thread per core and assumes the cores are idle. When another program keeps
some of them busy, every parallel region waits for its slowest thread, which now shares a core with
that program, and spins while it waits: the whole process slows far more than its fair share of the
cores would cost. So the grid gives torch the cores nobody else is using when each unit starts,
measured over a fraction of a second from /proc/stat (Linux; elsewhere every core), at least one.
Written here because neither torch nor OpenMP looks at the load of the machine.
"""

from __future__ import annotations

import os
import time

SAMPLE_SECONDS = 0.3  # how long the load is watched before a unit: a unit takes a minute or more


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _busy_and_total() -> tuple[int, int]:
    """Jiffies all CPUs spent busy (not idle, not waiting on I/O) and in all, since boot."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields[:8]) - idle, sum(fields[:8])


def _own() -> int:
    """Jiffies this process (all its threads) spent on a CPU, user and system."""
    with open("/proc/self/stat") as f:
        after_name = f.read().rsplit(")", 1)[1].split()
    return int(after_name[11]) + int(after_name[12])  # utime, stime (fields 14 and 15)


def others_busy(seconds: float = SAMPLE_SECONDS) -> float:
    """How many cores other programs kept busy over the next `seconds` (0.0 where /proc is missing)."""
    try:
        busy0, total0, own0 = *_busy_and_total(), _own()
        time.sleep(seconds)
        busy1, total1, own1 = *_busy_and_total(), _own()
    except (OSError, ValueError, IndexError):
        return 0.0
    cpus = os.cpu_count() or 1
    if total1 <= total0:
        return 0.0
    return max(0.0, (busy1 - busy0 - (own1 - own0)) / (total1 - total0) * cpus)


def free_cores() -> int:
    """The cores of this process's that no other program is using now, at least one."""
    return max(1, cores() - int(others_busy() + 0.5))


def use(threads: int) -> int:
    """Give torch `threads` intra-op threads; 0: $OMP_NUM_THREADS when set, else the free cores now.
    Returns the number set."""
    import torch

    if threads <= 0:
        fixed = os.environ.get("OMP_NUM_THREADS", "")
        threads = int(fixed) if fixed.isdigit() and int(fixed) > 0 else free_cores()
    torch.set_num_threads(threads)
    return threads
