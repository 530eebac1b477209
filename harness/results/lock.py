"""One writer per results folder and shard: a run holds a lock file naming its PID, host and start while it
writes; a second run into the same folder and shard is refused, naming the holder. Runs of one folder
must also share their shard count (shards of two counts overlap: both would compute the same units), and
a run that deletes (`--overwrite`) must be the folder's only run. A lock whose process is gone (killed, or
the machine restarted) is taken over with a note. Written here because a lock file is
the one kind that works on a cluster's shared disk, where fcntl locks may not."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from harness.core.plumbing.errors import UserError
from harness.results.paths import lock_path, shard_locks


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def holder(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def others(mdir: Path, mine: Path) -> list[tuple[Path, dict]]:
    """The folder's other locks whose run is not known to be gone (one on another host counts)."""
    found = []
    for path in shard_locks(mdir):
        other = holder(path)
        pid = other.get("pid")
        gone = isinstance(pid, int) and other.get("host") == socket.gethostname() and not alive(pid)
        if path != mine and not gone:
            found.append((path, other))
    return found


def beside(mdir: Path, shard: tuple[int, int], mine: Path, alone: bool) -> str:
    """Why this run cannot write beside the folder's other runs ('' where it can)."""
    for path, other in others(mdir, mine):
        who = f"PID {other.get('pid')} on {other.get('host')}, started {other.get('started')} ({path.name})"
        if alone:
            return f"another run ({who}) is writing {mdir}, and --overwrite would delete units beside it"
        count = path.name.rsplit("of", 1)[-1]
        if count != str(shard[1]):
            return (
                f"another run ({who}) is writing {mdir} in {count} shard(s), and this run's shards are "
                f"{shard[1]}: the two would compute the same units"
            )
    return ""


@contextlib.contextmanager
def held(mdir: Path, shard: tuple[int, int], alone: bool = False) -> Iterator[Path]:
    """Hold the lock of `mdir`'s `shard` while the block runs; refuse where another live run holds it, where
    a live run of another shard count writes the folder, or (`alone`: the run deletes) where any does."""
    path = lock_path(mdir, shard)
    path.parent.mkdir(parents=True, exist_ok=True)
    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            other = holder(path)
            pid, host = other.get("pid"), other.get("host")
            who = f"PID {pid} on {host}, started {other.get('started')}"
            if isinstance(pid, int) and host == me["host"] and not alive(pid):
                print(f"note: took over {path}: its run ({who}) is no longer running", file=sys.stderr)
                path.unlink(missing_ok=True)
                continue
            if not other:  # being written by a run starting this moment
                time.sleep(0.2)
                continue
            raise UserError(
                f"another run ({who}) is writing {mdir} shard {shard[0]}/{shard[1]} (lock {path}); wait "
                "for it to end, or write to another --out; if no run is writing there (the run ended on "
                "another machine, or its PID now belongs to another program), delete the lock file"
            ) from None
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
        except OSError as err:  # a full disk: an empty lock left behind would read as a run starting
            path.unlink(missing_ok=True)
            raise UserError(
                f"cannot write the lock {path} ({err.strerror}); nothing was run: free the disk, then run "
                "the same command again"
            ) from err
        break
    else:
        raise UserError(f"could not take the lock {path}; delete it if no run is writing {mdir}")
    problem = beside(mdir, shard, path, alone)  # each run checks after taking its own: one of two sees both
    if problem:
        path.unlink(missing_ok=True)
        raise UserError(f"{problem}; wait for it to end, or write to another --out")
    try:
        yield path
    finally:
        if holder(path).get("pid") == me["pid"]:
            path.unlink(missing_ok=True)
