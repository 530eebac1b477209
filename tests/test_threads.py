"""The torch threads a grid takes: the cores nobody else is using, unless told otherwise."""

import subprocess
import sys
import time

import pytest
import torch

from harness.core.engine import threads


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.slow  # it needs a free core: the default tier's processes keep every core busy
def test_a_busy_program_beside_this_one_is_counted_as_a_busy_core():
    idle = threads.others_busy(0.5)
    if idle > threads.cores() - 1:
        pytest.skip(f"{idle:.1f} of {threads.cores()} cores are busy already: a busy loop cannot add one")
    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        loaded = threads.others_busy(0.5)
    finally:
        loop.kill()
        loop.wait()
    assert loaded - idle > 0.5, (idle, loaded)  # one core's worth, whatever else the machine runs


def test_threads_given_or_in_omp_num_threads_are_used_as_they_are(monkeypatch, restore_threads):
    assert threads.use(1) == 1 and torch.get_num_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    torch.set_num_threads(2)
    assert threads.use(0) == 1 and torch.get_num_threads() == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert 1 <= threads.use(0) <= threads.cores()
