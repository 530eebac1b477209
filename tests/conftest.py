"""Shared fixtures: the data (the repository's made-up fixture data for the default tier; the offline
samples in ../shared for the slow tier's real-data runs), tiny random-weight models with real tokenizers,
and one tiny zero-shot grid run that the tests which only read its results share."""

from __future__ import annotations

import os
from pathlib import Path

# the tests reach no hub: a model or dataset missing locally fails at once instead of after the hub
# client's retries (seconds each), in this process and in the commands the tests start; set before any
# library that reads it is imported
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
if os.environ.get("PYTEST_XDIST_WORKER"):  # one of several test processes: a core each, as a grid worker has
    os.environ.setdefault("OMP_NUM_THREADS", "1")
# glibc hands every block over its threshold (a tensor of the 49k-token vocabulary's scores, say) fresh
# pages from the kernel and returns them when freed, so each one is faulted in again, in the kernel's time
# (docs/measurements/grid_wing.md). Blocks of any size stay in the heap of the processes started from here
# on: the test processes pytest-xdist starts after it reads this file, and the commands the tests start.
os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(10**12))
os.environ.setdefault("MALLOC_TRIM_THRESHOLD_", str(10**12))

import pytest
from helpers import make_tiny_bert, make_tiny_llama, tiny_grid_config

REPO = Path(__file__).resolve().parent.parent
FIXTURE_DATA = REPO / "tests" / "data"  # made-up texts of 4 tasks (tests/data/make_fixtures.py)
SHARED = REPO.parent / "shared"
DATA_DIR = SHARED / "data"
REFERENCE = SHARED / "reference"


def shared_path(path: Path) -> Path:
    """A folder of ../shared: skipped where it is missing, except under CI (CI=true), where it fails."""
    if not path.is_dir():
        message = f"{path} not found: the tests read the offline samples in ../shared beside the checkout"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """ag_news, rotten_tomatoes, trec and climate_fever, made up in the samples' shape: in every clone."""
    return FIXTURE_DATA


@pytest.fixture(scope="session")
def real_data_dir() -> Path:
    """The offline samples of 20 real datasets, beside the checkout (the slow tier's real-data runs)."""
    return shared_path(DATA_DIR)


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    return shared_path(REFERENCE)


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> Path:
    """A 2-layer Llama with random weights and SmolLM2's real tokenizer (helpers.make_tiny_llama)."""
    return made_once(tmp_path_factory, "tiny_llama", make_tiny_llama)


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    """A 2-layer BERT with random weights and all-MiniLM-L6-v2's real tokenizer (helpers.make_tiny_bert)."""
    return made_once(tmp_path_factory, "tiny_bert", make_tiny_bert)


@pytest.fixture(scope="session")
def tiny_grid(tmp_path_factory, tiny_llama, data_dir) -> Path:
    """One uninterrupted run of tiny_grid_config, shared by every test that only reads it or compares
    another run with it (resumed, sharded, on Ray)."""
    import harness

    def full(tmp: Path) -> None:
        harness.run(tiny_grid_config(tmp, tiny_llama, data_dir, tmp / "full"))

    return made_once(tmp_path_factory, "tiny_grid", full) / "full"


def made_once(tmp_path_factory, name: str, make) -> Path:
    """A folder `make` fills once per session: the test processes share it, the first one to need it makes
    it while the others wait (the folders the tests above only read)."""
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the folder above every worker's own
    folder, done = shared / name, shared / f"{name}.made"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.exists():
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


def pytest_configure(config):
    """pytest-xdist's loadgroup sends the tests of one xdist_group to one process by adding the group to
    their ids; pytest 9.2 keeps ids where pytest-xdist 3.8 cannot add it, and the group would be spread
    over every process, its shared work done in each: stop, naming the fix."""
    from packaging.version import Version

    if config.getoption("dist", "no") == "loadgroup" and Version(pytest.__version__) >= Version("9.2"):
        raise pytest.UsageError(
            f"pytest {pytest.__version__} spreads each xdist_group over every test process; install the "
            "tested versions (pip install -e '.[dev]'), or run with -p no:xdist"
        )


@pytest.fixture(autouse=True)
def frozen_heap(request):
    """Before each test, every object alive so far (the libraries, the collected modules, the shared
    fixtures) is moved out of the cyclic collector's reach: the full collection that transformers' Trainer
    runs before each training (accelerate's free_memory) then walks only the test's own objects, and the
    tier's many tiny trainings stop paying for the rest. The price: a cycle among those older objects that
    later becomes garbage is never freed, a little more memory a test process holds at its peak
    (docs/measurements/grid_wing.md). Reference counting frees everything else as before. Not in the slow
    tier: its real models, each a few hundred MB, run in one process all tier long."""
    import gc

    if request.node.get_closest_marker("slow") is None:
        gc.freeze()
