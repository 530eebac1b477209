"""A full disk, at each write a run makes that is not a unit's atomic write: the lock, the run's log, a
library's own write. Each says one line on the terminal, and leaves no lock behind. /dev/full refuses
every write with ENOSPC, as a full disk does."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.core.plumbing import run_log
from harness.core.plumbing.errors import UserError
from harness.results import lock

FULL = Path("/dev/full")
pytestmark = pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full (Linux)")


def test_a_lock_the_disk_refuses_is_said_and_not_left_behind(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(lock.json, "dump", full)
    refused = r"cannot write the lock .*No space left on device.*free the disk"
    with pytest.raises(UserError, match=refused), lock.held(tmp_path, (0, 1)):
        pass
    assert list(tmp_path.iterdir()) == []  # an empty lock would read as a run starting, forever


def test_the_terminal_comes_back_when_the_log_cannot_take_the_last_lines():
    before = os.fstat(2)
    with pytest.raises(UserError, match="the run's own error"), run_log.output_to(FULL):
        print("a line the full log refuses at its end", end="")
        raise UserError("the run's own error")
    after = os.fstat(2)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)  # not left on the log


def test_a_log_line_the_disk_refuses_is_said_once(capsys):
    handler = run_log.RunLog(FULL)
    log = logging.getLogger("test_full_disk")
    log.addHandler(handler)
    try:
        for i in range(3):
            log.warning("line %d", i)
    finally:
        log.removeHandler(handler)
        handler.close()
    err = capsys.readouterr().err
    assert err.count("note: cannot write the run's log /dev/full") == 1, err
    assert "Logging error" not in err and "Traceback" not in err


def test_a_full_disk_anywhere_else_is_one_line(monkeypatch, capsys):
    def full(argv):
        raise OSError(errno.ENOSPC, "No space left on device", "/data/cache/x.bin")

    monkeypatch.setattr(cli_main, "_run", full)
    monkeypatch.delenv("TAPT_BENCH_TRACEBACK", raising=False)
    with pytest.raises(SystemExit) as stop:
        cli_main.main(["run"])
    assert str(stop.value).startswith("tapt-bench: error: the disk is full (No space left on device writing")
    assert "/data/cache/x.bin" in str(stop.value)
    monkeypatch.setenv("TAPT_BENCH_TRACEBACK", "1")
    with pytest.raises(OSError):  # asked for: the traceback
        cli_main.main(["run"])


def test_a_method_that_runs_out_of_disk_says_so_in_one_line():
    from harness.api import Method, Settings
    from tapt.methods.contract import Inputs

    def adapt(inputs):
        raise OSError(errno.ENOSPC, "No space left on device", "/out/checkpoint-1/model.safetensors")

    method = Method("full-disk", ("full",), Settings, adapt, "runs out of disk")
    with pytest.raises(
        UserError,
        match=r"method full-disk could not write: the disk is full \(No space left on device writing /out/",
    ):
        method.run(Inputs(None, None, None, None, Settings(), 0, Path("w"), model_dir="base"))


def test_a_file_size_limit_is_said_as_the_shells_not_blamed_on_the_method(monkeypatch):
    """`ulimit -f` stops a write with EFBIG (Python ignores the signal): the method was blamed for it."""
    import resource

    from harness.api import Method, Settings
    from tapt.methods.contract import Inputs

    def adapt(inputs):
        raise OSError(errno.EFBIG, "File too large", "/out/checkpoint-1/model.safetensors")

    monkeypatch.setattr(resource, "getrlimit", lambda what: (8192, resource.RLIM_INFINITY))
    method = Method("big-file", ("big",), Settings, adapt, "writes past the limit")
    with pytest.raises(UserError) as refused:
        method.run(Inputs(None, None, None, None, Settings(), 0, Path("w"), model_dir="base"))
    said = str(refused.value)
    assert "file-size limit (ulimit -f: 8192 bytes) writing /out/checkpoint-1" in said
    assert "ulimit -f unlimited" in said and "failed" not in said
