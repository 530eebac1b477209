"""`--workers k`: k processes on this machine, each a shard of the run's units, into the same results."""

from __future__ import annotations

import subprocess
import sys

from harness import results
from harness.core.errors import UserError
from harness.grid.config import GridConfig
from harness.grid.run import check_settings, task_dir


def run_workers(
    argv: list[str], cfg: GridConfig, shard: tuple[int, int], workers: int, overwrite: bool
) -> None:
    """`workers` processes, each re-running this command (`argv`) on its slice of the shard's units,
    writing the same layout; then the tables are rebuilt once from every finished unit (each worker
    rebuilt them for its own)."""
    for cell in cfg.cell_configs():  # once, here, rather than racing in every worker
        check_settings(cell, overwrite)
    i, count = shard
    command = [sys.executable, "-m", "harness.cli", *argv]  # repeated flags: the last one counts
    procs = [
        subprocess.Popen(
            [*command, "--workers", "1", "--no-summary", "--shard", f"{i + j * count}/{count * workers}"]
        )
        for j in range(workers)
    ]
    failed = [j for j, proc in enumerate(procs) if proc.wait() != 0]
    for cell in cfg.cell_configs():
        for slug in cell.slugs:
            if (task_dir(cell, slug) / "units").is_dir():
                results.rebuild(task_dir(cell, slug))
    if failed:
        raise UserError(
            f"worker(s) {failed} of {workers} failed (their output is above); rerun the same command "
            "to finish their units: finished units are kept"
        )
