"""`--workers`: a grid's units in worker processes on this machine. Each worker loads the base once and
keeps it for every unit it runs. This process hands the units out one at a time and writes every result,
under the run's one lock, while the workers compute the next units.

`--workers auto` on a GPU sizes itself from measurement. The first unit runs alone; its worker reads the
unit's peak GPU memory (the allocator's peak, plus what the process holds outside it: the CUDA context and
the libraries' buffers). Then as many workers start as fit in the card, leaving a margin, and at most half
the cores: a unit's host work (Python, the kernel launches) keeps a core busy. A later unit that needs more
memory retires a worker; a unit that runs out of memory is retried on the workers left. On a CPU, auto is
one unit at a time in this process, as a plain run is.

Written here, not with concurrent.futures: its pool cannot grow after a first task, retire one worker, or
tell which worker ran out of memory."""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
import os
import pickle
import queue
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Iterator

from harness.core.engine import threads as thread_count
from harness.core.plumbing.errors import UserError, named
from harness.grid.execution.worker_messages import Done, Failed, Job, Memory, measure
from harness.grid.unit import flow
from harness.grid.unit.base_model import LOADED
from harness.grid.unit.unit_plan import UnitPlan
from harness.grid.unit.unit_record import UnitRecord

log = logging.getLogger("tapt_bench.grid")

MARGIN = 0.10  # the share of a GPU's memory kept free: units differ in their longest prompts
SPAWN = multiprocessing.get_context("spawn")  # a forked child cannot use CUDA


def fits(footprint: float, total: float, cores: int, gpus: int = 1) -> tuple[int, int, int]:
    """(workers, how many the memory allows, how many the cores allow) for units of `footprint` GiB each on
    `gpus` cards of `total` GiB."""
    by_memory = max(1, math.floor(total * (1 - MARGIN) / footprint)) * gpus
    by_cores = max(1, cores // 2)
    return min(by_memory, by_cores), by_memory, by_cores


def mps_note() -> str:
    """Whether the NVIDIA multi-process service runs here, and what it changes for the workers."""
    pipe = os.path.join(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"), "control")
    if os.path.exists(pipe):
        return "the NVIDIA multi-process service is running: the workers' kernels share the GPU side by side"
    return (
        "the NVIDIA multi-process service is not running: the workers' kernels take turns on the GPU "
        "(time slices); with it (nvidia-cuda-mps-control -d) their small kernels could run side by side"
    )


def is_oom(err: BaseException) -> bool:
    return type(err).__name__ == "OutOfMemoryError" or "CUDA out of memory" in str(err)


def orphaned_exit(parent: int) -> None:
    """End this worker as soon as the process that started it is gone (killed, say): a unit it computes
    then has no one to write it."""
    while os.getppid() == parent:
        time.sleep(2.0)
    os._exit(1)


def serve(index: int, jobs, done, parent: int) -> None:
    """A worker: computes each unit it is handed, until it is handed None. Its printing goes to the log
    file each job names (the run's)."""
    threading.Thread(target=orphaned_exit, args=(parent,), daemon=True).start()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    into = None
    while (job := jobs.get()) is not None:
        if job.logfile and job.logfile != into:
            sys.stdout.flush()
            sys.stderr.flush()
            fd = os.open(job.logfile, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
            into = job.logfile
        threads = thread_count.use(job.threads)
        slug, k = job.plan.key
        log.info(
            "%s subsample %d: start in worker %d (pid %d), %d torch thread(s)",
            slug,
            k,
            index,
            os.getpid(),
            threads,
        )
        try:
            base_first(job.plan)
            record = flow.compute(job.plan, job.keep_adapters)
        except BaseException as err:  # reported, not raised: this process decides what follows
            done.put(Failed(index, job.plan.key, is_oom(err), named(err), traceback.format_exc()))
            if isinstance(err, KeyboardInterrupt):
                return
            free_gpu_memory()
            continue
        done.put(Done(index, record, measure(job.alone)))


def base_first(plan: UnitPlan) -> None:
    """Load what the unit's flow keeps loaded (its `preload`: the zero-shot base) before this worker's
    first unit, then forget the peak its loading passed through (transformers holds a layer's
    full-precision weights while it quantises them): a unit's peak is what the unit needs beside it."""
    preload = flow.get(plan.grid.flow).preload
    if preload is None or LOADED.base is not None:
        return
    preload(plan)
    free_gpu_memory()
    import torch

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def free_gpu_memory() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@contextlib.contextmanager
def visible_card(index: int, gpus: int) -> Iterator[None]:
    """The environment a worker starts in: on a machine of several cards, worker `index` sees one of them,
    round robin (of those CUDA_VISIBLE_DEVICES lists, where it is set)."""
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    if gpus > 1:
        cards = before.split(",") if before else [str(i) for i in range(gpus)]
        os.environ["CUDA_VISIBLE_DEVICES"] = cards[index % len(cards)]
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before


def run_log() -> str | None:
    """The run's log file: the grid logger's file handler (harness/grid/execution/run.py start_log)."""
    files = [h.baseFilename for h in log.handlers if isinstance(h, logging.FileHandler)]
    return files[-1] if files else None


class Pool:
    """Worker processes that outlive a run's cells and rounds: `execute` is a run.run executor. `workers`:
    a fixed count, or None to size them on a GPU from the first unit's memory. Close it (a `with` block)."""

    def __init__(self, workers: int | None, threads: int = 0, gpus: int = 1) -> None:
        self.want, self.threads, self.gpus = workers, threads, max(1, gpus)
        self.jobs: dict[int, object] = {}
        self.procs: dict[int, multiprocessing.Process] = {}
        self.done = SPAWN.Queue()
        self.size = workers  # auto: None until the first unit's memory is read
        self.footprint = 0.0  # the largest unit's GiB, the memory outside the allocator included
        self.outside: float | None = None
        self.count = 0

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc) -> None:
        self.close(kill=exc[0] is not None)

    def start(self, workers: int) -> None:
        for _ in range(workers):
            index, self.count = self.count, self.count + 1
            jobs = SPAWN.Queue()
            proc = SPAWN.Process(target=serve, args=(index, jobs, self.done, os.getpid()), daemon=True)
            with visible_card(index, self.gpus):
                proc.start()
            self.jobs[index], self.procs[index] = jobs, proc

    def retire(self, index: int) -> None:
        self.jobs.pop(index).put(None)
        self.procs.pop(index).join(timeout=60)

    def close(self, kill: bool = False) -> None:
        for index in list(self.procs):
            if kill:
                self.procs[index].terminate()
                self.procs.pop(index).join(timeout=10)
                self.jobs.pop(index)
            else:
                self.retire(index)

    def execute(self, pending: list[UnitPlan], keep_adapters: bool) -> Iterator[UnitRecord]:
        """Each unit of `pending` on the next free worker; yields their records as they finish."""
        todo, busy = deque(pending), {}
        self.start(min(self.size or 1, len(todo)) - len(self.procs))  # none beyond the units to run
        try:
            while todo or busy:
                for index in [i for i in self.procs if i not in busy]:
                    if todo:
                        busy[index] = todo.popleft()
                        self.send(index, busy[index], keep_adapters)
                reply = self.receive(busy)
                plan = busy.pop(reply.worker)
                if isinstance(reply, Done):
                    self.account(reply.worker, reply.memory, len(todo) + len(busy))
                    yield reply.record
                elif reply.oom and len(self.procs) > 1:
                    self.retire(reply.worker)
                    todo.appendleft(plan)
                    log.warning(
                        "%s subsample %d ran out of GPU memory: retried with %d workers",
                        *plan.key,
                        len(self.procs),
                    )
                else:
                    with contextlib.suppress(OSError):  # a full disk refuses the log: the error still shows
                        print(reply.trace, file=sys.stderr)
                    raise UserError(
                        f"unit {reply.key.slug} subsample {reply.key.k} failed in a worker: {reply.error}\n"
                        "(its traceback is in the run's log) Finished units are kept; the same command "
                        "reruns the rest."
                    )
        except BaseException:
            self.close(kill=True)  # units in flight are lost; a rerun computes them
            raise

    def send(self, index: int, plan: UnitPlan, keep_adapters: bool) -> None:
        threads = self.threads or max(1, thread_count.cores() // len(self.procs))
        alone = len(self.procs) == 1 and self.outside is None
        job = Job(plan, keep_adapters, threads, run_log(), alone)
        pickle.dumps(job)  # one that cannot reach a worker fails here, not in the queue's thread (a hang)
        self.jobs[index].put(job)

    def receive(self, busy: dict[int, UnitPlan]) -> Done | Failed:
        """The next finished unit's reply; a worker that died instead stops the run, naming its unit."""
        while True:
            try:
                return self.done.get(timeout=1.0)
            except queue.Empty:
                for index, plan in busy.items():
                    if not self.procs[index].is_alive():
                        code = self.procs[index].exitcode
                        raise UserError(
                            f"the worker computing {plan.key.slug} subsample {plan.key.k} died (exit code "
                            f"{code}); finished units are kept; the same command reruns the rest"
                        ) from None

    def account(self, index: int, memory: Memory | None, left: int) -> None:
        """With auto, size the workers from the first unit's memory (`left`: the units still to run or
        running), and retire one where a later unit needed more."""
        if self.want is not None or memory is None:
            return
        if memory.outside is not None:
            self.outside = memory.outside
        self.footprint = max(self.footprint, memory.peak + (self.outside or 0.0))
        workers, by_memory, by_cores = fits(self.footprint, memory.total, thread_count.cores(), self.gpus)
        if self.size is None:  # the first unit, run alone
            self.size = workers
            log.info(
                "workers auto: a unit's peak GPU memory %.1f GiB of %.1f (%s): %d units in flight (memory "
                "for %d, cores for %d); %s",
                self.footprint,
                memory.total,
                memory.name,
                workers,
                by_memory,
                by_cores,
                mps_note(),
            )
            self.start(min(workers, len(self.procs) + left) - len(self.procs))
        elif len(self.procs) > workers:
            self.size = workers
            log.warning("a unit's peak GPU memory %.1f GiB: %d workers from now on", self.footprint, workers)
            self.retire(index)
