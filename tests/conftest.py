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
    return make_tiny_llama(tmp_path_factory.mktemp("tiny_llama"))


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    """A 2-layer BERT with random weights and all-MiniLM-L6-v2's real tokenizer (helpers.make_tiny_bert)."""
    return make_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="session")
def tiny_grid(tmp_path_factory, tiny_llama, data_dir) -> Path:
    """One uninterrupted run of tiny_grid_config, shared by every test that only reads it or compares
    another run with it (resumed, sharded, on Ray)."""
    from harness.grid.configuration.config import load_config
    from harness.grid.execution.run import run

    tmp = tmp_path_factory.mktemp("tiny_grid")
    run(load_config(tiny_grid_config(tmp, tiny_llama, data_dir, tmp / "full")))
    return tmp / "full"
