"""The confirmatory plan the pilot writes: the study's config with the pilot's values, its power
calculation in its header, checked as a config before it is written (harness.study.pilot)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import yaml

from harness import results
from harness.core.design import conditions
from harness.core.plumbing import yaml_files
from harness.core.plumbing.errors import UserError
from harness.grid.configuration.config import GridConfig, config_path
from harness.study.head_recipes import recipe_text, with_recipe
from harness.study.pilot_screen import RULE

PILOT_ONLY = ("seed", "subsamples", "out", "data_dir", "include_path", "confirmatory", "cells")

MARK = "A confirmatory plan written by `tapt-bench pilot"  # a plan file's first words: --overwrite's own


def write_plan(opts, cfg: GridConfig, given: dict, found: dict) -> None:
    """The study's config file with the pilot's plan in it (`opts`: the pilot's PilotOptions), checked as a
    config, then written."""
    from harness.grid.configuration.config import load_config

    raw = yaml_files.load(config_path(opts.config).read_text()) or {}
    keys = with_recipe(
        {k: v for k, v in {**raw, **given}.items() if k not in PILOT_ONLY}, found["head_recipe"]
    )
    entered = found["entered"]
    keys |= {
        "tasks": entered,
        "subsamples": found["subsamples"],
        "seed": opts.plan_seed,
        "conditions": [c for c in conditions.ALL if c in {*cfg.grid.conditions, conditions.LEAK}],
        "leak_strength": found["strength"],
        "confirmatory": True,
        "out": opts.plan_out or f"results/{Path(opts.plan).stem}",
    }
    if found["head_recipe"] != "study":  # the recipe's values in every task's override, as the pilot ran
        keys["task_overrides"] = dict(cfg.grid.task_overrides)
    if keys.get("task_overrides"):
        keys["task_overrides"] = {k: v for k, v in keys["task_overrides"].items() if k in entered}
    leak = next(lk for lk in found["leaks"] if lk["strength"] == found["strength"])
    p = cfg.plan
    header = [
        f"{MARK} --config {opts.config}` from its pilot (seed "
        f"{found['pilot_seed']}, {cfg.grid.subsamples} subsample(s) a task; every number in "
        f"{results.pilot_path(cfg.grid.out)}). Commit it before its first unit.",
        f"Screen ({RULE}): {len(entered)} of {len(found['screen'])} tasks enter.",
        f"Head recipe: {found['head_recipe']} ({recipe_text(found['head_recipe'])}); tasks entering under "
        f"each tried: {', '.join(f'{r} {k}' for r, k in found['head_recipes_tried'].items())}.",
        f"Spread: the per-unit sd of test - extra over their pilot units is {found['sd']:.2f} points.",
        f"K: a {p.sides}-sided paired test at alpha {p.alpha:g} sees {p.equivalence_bound:g} points with 80% "
        f"power over {found['units_for_bound']} units; a task's own test needs {found['task_floor']}: "
        f"{found['subsamples']} a task, {found['units']} units, MDE {found['mde']:.2f} points.",
        f"Leak: strength {found['strength']} moved leak - extra by {leak['mean']:+.2f} points (sd "
        f"{leak['sd']:.2f}) over {leak['units']} pilot units: seen one-sided with {leak['power']:.0%} power "
        f"at K (tried: {', '.join(str(lk['strength']) for lk in found['leaks'])}); power read at its "
        f"one-sided 95% lower bound, {leak['low']:+.2f} points.",
    ]
    if not found["per_task_after_bh"]:
        header.append(
            f"Per task: at {found['subsamples']} units a task's smallest p times {len(entered)} tasks stays "
            f"above alpha {p.alpha:g}: no task's own test can reject after BH; the plan is read pooled only."
        )
    wrapped = [part for line in header for part in textwrap.wrap(line, 100)]
    text = "".join(f"# {line}\n" for line in wrapped) + yaml.safe_dump(keys, sort_keys=False, width=100)
    target = Path(opts.plan)
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_name(f".{target.stem}.{os.getpid()}.checking.yaml")  # never a user's file
    staged.write_text(text)
    try:
        load_config(staged, {"data_dir": cfg.sample.data_dir, "include_path": cfg.sample.include_path})
    except UserError as err:
        staged.unlink()
        raise UserError(f"the plan the pilot would write does not read as a config: {err}") from None
    staged.replace(target)
