"""A study fixed before it runs: a config declares the test its answer will be read with.

A confirmatory config states, in the file, every choice a reader could suspect was made after the data:
its units a task (`subsamples`), its seed (`seed`), the test's sides and level, the family its p-values
are corrected over, and the bound below which a bias is called negligible. `run` records the config's
hash and the product code's commit with every unit; `summarize` calls a result confirmed only where the
records match the plan (harness.stats.summary.confirmation). None of these keys changes a unit's numbers.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.core.plumbing.settings import NEVER, Settings, fingerprint, option

# the product code: a unit's numbers depend on these, never on docs, tests or benchmarks
PRODUCT = ("harness", "tapt", "contamination", "tasks_yaml", "pyproject.toml", "setup.py")
ROOT = Path(__file__).resolve().parents[2]
# keys that say where a run reads and writes, not what it computes: left out of the config's hash
WHERE = ("out", "data_dir", "include_path", "notes")


@dataclass(kw_only=True)
class PlanSettings(Settings):
    """The study's plan, declared before it runs: how its answer is tested."""

    RECORD = dict.fromkeys(("confirmatory", "sides", "alpha", "family", "equivalence_bound"), NEVER)
    ABOVE = {"alpha": 0.0, "equivalence_bound": 0.0}
    BELOW = {"alpha": 0.5}

    confirmatory: bool = option(
        False,
        "declare this config a confirmatory study: its subsamples, seed and test below are the plan, "
        "and `summarize` says 'confirmed' only where every planned unit ran on one commit of the code",
    )
    sides: Literal["two", "one"] = option(
        "two",
        "the bias test's sides: two (the default: a bias either way) or one (test > extra only, the "
        "study's own test)",
    )
    alpha: float = option(0.05, "the test's level, after the family's correction")
    family: Literal["config", "model"] = option(
        "config",
        "the p-values corrected together (Benjamini-Hochberg): config, every method and dose a summary "
        "holds; model, each method and dose on its own (no correction across them)",
    )
    equivalence_bound: float = option(
        5.0,
        "points: a bias whose two-sided interval ends below this is called 'not inflated beyond' it",
    )


# keys a run narrows a config's by, one run a cell, method and dose (GridConfig.run_configs): its runs
# differ in them alone, so the plan they share is the config without them
NARROWED = ("m", "n", "subsamples", "cells", "method", "methods", "method_settings", "doses")


def family_hash(keys: dict) -> str:
    """The hash of the plan a run's config belongs to: its config without where it reads and writes and
    without what narrows it to one cell, method and dose; every run of one plan shares it."""
    return config_hash({k: v for k, v in keys.items() if k not in NARROWED})


def config_hash(keys: dict) -> str:
    """The hash of a config's keys, without those that only say where it reads and writes (WHERE)."""
    return fingerprint({k: v for k, v in keys.items() if k not in WHERE})


def code_version() -> dict:
    """The product code's commit, and whether its files differ from it ('dirty'); the commit is None
    outside a git checkout (an installed package), where a result cannot be tied to one commit."""
    try:
        head = git("rev-parse", "HEAD")
        changed = git("status", "--porcelain", "--", *PRODUCT)
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}
    return {"commit": head, "dirty": bool(changed)} | ({"diff": diff_hash()} if changed else {})


def git(*args: str) -> str:
    out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def diff_hash() -> str:
    """A short hash of the product code's uncommitted changes, so that two dirty runs can be told apart."""
    return hashlib.sha256(git("diff", "HEAD", "--", *PRODUCT).encode()).hexdigest()[:16]
