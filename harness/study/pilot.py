"""The pilot that sizes a confirmatory plan (`tapt-bench pilot`): it runs a study's config on a seed the plan
never uses, and writes the plan.

1. Every task, at the first leak strength: units of base, extra, test and the planted leak.
2. The screen, by a rule fixed here before any bias is read: a task enters where its base beats chance on
   train's and extra's documents (never test's), a one-sided binomial test at ALPHA. Chance is what always
   answering a split's most frequent class gets right (the classifier flow), or the zero-shot screen's
   (harness.study.screen).
3. The spread: the per-unit sd of test - extra over the entered tasks' units. The plan's units K: the
   fewest whose paired test sees the plan's bound with 80% power (harness.core.power), at least enough a
   task for a task's own sign-flip test to reject.
4. The leak: each strength in turn (the entered tasks alone after the first), until the pooled leak -
   extra over K units is seen with 80% power; the first such strength is the plan's.

The plan file is the study's config with those values, its power calculation in its header; commit it
before its first unit.
"""

from __future__ import annotations

import math
import os
import textwrap
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from harness import results
from harness.core import conditions, yaml_files
from harness.core.errors import SettingsError, UserError
from harness.core.power import POWER, mde_at, power_at, units_for_bound
from harness.core.settings import Settings, option
from harness.grid.configuration import plan, resolve
from harness.grid.configuration.config import GridConfig, config_path
from harness.grid.execution.run import run
from harness.study.screen import LEARNS, Screened

RULE = (
    "base beats chance on the train and extra documents of the pilot's units (binomial, one-sided); in the "
    f"classifier flow also, in most pilot units, its head's final training loss is below {LEARNS:g} x ln K "
    "and its test accuracy above the test subsample's majority share"
)
# a confirmatory plan's seed must stay this far from its pilot's: the classifier stream of unit k is
# seed + k, so two seeds closer than the units' count share a unit's training seed (harness.core.seeds)
SEED_GAP = 1000


# the classifier head's named recipes, a ladder the pilot climbs: the config's own (the study's 3 epochs at
# 5e-5 by default), then longer ones for an encoder whose head does not learn in the study's 9 steps at
# m 50 (all-MiniLM-L6-v2, say)
HEAD_RECIPES = {
    "study": {},
    "long": {"clf_epochs": 10.0, "clf_lr": 1e-4},
    "longer": {"clf_epochs": 20.0, "clf_lr": 3e-4},
}


def recipe_text(name: str) -> str:
    keys = HEAD_RECIPES.get(name, {})
    return ", ".join(f"{k} {v:g}" for k, v in keys.items()) or "the config's own"


@dataclass(kw_only=True)
class PilotOptions(Settings):
    """What the pilot tries and where it writes the plan; the study's own keys are the config's."""

    MINIMUM = {"plan_seed": 0}

    config: str = option(
        help="the study's grid config (YAML, or a shipped config's name); its seed is the pilot's"
    )
    plan: str = option(help="the confirmatory plan to write (a YAML config): commit it before its first unit")
    plan_seed: int = option(help="the plan's seed: one the pilot (and any run you read) never used")
    strengths: list[int] = option(
        [1, 4, 16], "leak strengths to try, in order, until the plan's units see the pooled leak"
    )
    head_recipes: list[str] = option(
        ["study"],
        "the classifier flow: the head's recipes to try, in order, until the heads of at least half the "
        "tasks learn (the screen): " + "; ".join(f"{name} ({recipe_text(name)})" for name in HEAD_RECIPES),
    )
    plan_out: str | None = option(None, "the plan's results folder (default: results/<the plan file's name>)")
    overwrite: bool = option(False, "replace an existing plan file")
    workers: str = option("auto", "as `tapt-bench run --workers`: worker processes for the pilot's units")
    threads: int = option(0, "as `tapt-bench run --threads`: torch threads a process (0: the free cores)")


@dataclass(frozen=True)
class Leak:
    """One strength's pooled leak over the entered tasks' pilot units, and its power at the plan's K read
    from the one-sided 95% lower bound of its mean (the mean alone reads a lucky pilot as the effect)."""

    strength: int
    units: int
    mean: float  # points
    sd: float
    power: float  # at the lower bound: what the plan may count on
    low: float = float("nan")  # the one-sided 95% lower bound of the mean, points
    power_at_mean: float = float("nan")
    absorbed: dict | None = None  # the manipulation check over the same units (harness.stats.control)


def per_task_floor(alpha: float, sides: str) -> int:
    """The fewest units a task needs for its own sign-flip test to reach alpha (its smallest p is 2^-u,
    twice that two-sided)."""
    u = 1
    while (2.0 if sides == "two" else 1.0) * 0.5**u > alpha:
        u += 1
    return u


def differences(folder: Path, effect: str, tasks: list[str]) -> np.ndarray:
    """One effect's per-unit differences, in points, over the units of `tasks` in a model folder."""
    control, treatment = conditions.EFFECTS[effect]
    out = []
    for task in tasks:
        for unit in results.finished(folder / task).values():
            out.append(100 * (unit[treatment] - unit[control]))
    return np.array(out)


def screen_from_units(folder: Path, task: str) -> Screened:
    """The classifier flow's screen of a task: its base heads' answers on train and extra (the units
    recorded them), against always answering each split's most frequent class."""
    from scipy import stats

    docs = correct = majority = 0
    for unit in results.finished(folder / task).values():
        for split in unit["training"]["classify_base"]["screen"].values():
            docs, correct, majority = (
                docs + split["documents"],
                correct + split["correct"],
                majority + split["majority"],
            )
    chance = majority / docs
    p = float(stats.binomtest(correct, docs, chance, alternative="greater").pvalue)
    units = list(results.finished(folder / task).values())
    ratios = [head_loss_ratio(u) for u in units]
    learned = sum(r < LEARNS for r in ratios)
    above = sum(u[conditions.BASE] > u["majority"] + 1e-9 for u in units)
    most = len(units) // 2 + 1
    entered = p <= 0.05 and learned >= most and above >= most
    return Screened(
        task, docs, correct, chance, p, entered, len(units), learned, above, float(np.median(ratios))
    )


def head_loss_ratio(unit: dict) -> float:
    """The base head's final training loss over ln K (the loss of a uniform guess over the K classes):
    the mean over its last epoch's steps (one batch's loss alone is noise)."""
    log = unit["training"]["classify_base"]
    losses, epochs = log.get("losses") or [], (unit.get("settings") or {}).get("clf_epochs") or 3.0
    last = losses[-max(1, round(len(losses) / epochs)) :]
    k = unit.get("num_classes") or 2
    return float(np.mean(last)) / math.log(k) if last else float("inf")


def screen(cfg: GridConfig, folder: Path) -> list[Screened]:
    if cfg.grid.flow == "classifier":
        return [screen_from_units(folder, t) for t in cfg.slugs]
    from harness.study.screen import screen_task

    return [screen_task(cfg, t) for t in cfg.slugs]


def with_recipe(keys: dict, name: str) -> dict:
    """Config keys with a head recipe's values, in the config and in every task's override of them."""
    recipe = HEAD_RECIPES[name]
    overrides = {
        task: {k: recipe.get(k, v) for k, v in o.items()}
        for task, o in (keys.get("task_overrides") or {}).items()
    }
    return keys | recipe | ({"task_overrides": overrides} if overrides else {})


def recipe_folder(out: Path, recipe: str) -> Path:
    """Where a recipe's pilot units go: out itself for the config's own, out/head-<name> for another."""
    return out if recipe == "study" else out / f"head-{recipe}"


def pilot_run(cfg: GridConfig, strength: int, out: Path, tasks: list[str], execute, threads: int) -> Path:
    """The pilot's units at one leak strength, into out/leak-<strength>; returns the model folder."""
    conds = [c for c in conditions.ALL if c in {*cfg.grid.conditions, conditions.LEAK}]
    overrides = {k: v for k, v in cfg.grid.task_overrides.items() if k in tasks}
    one = cfg.replace(
        out=str(out / f"leak-{strength}"),
        tasks=tasks,
        task_overrides=overrides,
        conditions=conds,
        leak_strength=strength,
        confirmatory=False,
    )
    run(plan.run_plan(one), execute=execute, threads=threads)
    return resolve.folder(one)


def choose_recipe(opts, cfg: GridConfig, strength: int, execute, threads: int, say):
    """The first head recipe (in --head-recipes' order) under which at least half the tasks pass the
    screen, else the one most pass under: (the config with it, its name, its first model folder, its
    screen, {recipe: tasks entered} for each tried)."""
    out, tried, best = Path(cfg.grid.out), {}, None
    for recipe in opts.head_recipes:
        one = (
            cfg
            if recipe == "study"
            else cfg.replace(**with_recipe({}, recipe), **recipe_overrides(cfg, recipe))
        )
        folder = pilot_run(one, strength, recipe_folder(out, recipe), one.slugs, execute, threads)
        screened = screen(one, folder)
        say(f"head recipe {recipe} ({recipe_text(recipe)}):")
        for s in screened:
            say(f"screen: {s.line()}")
        tried[recipe] = sum(s.entered for s in screened)
        if best is None or tried[recipe] > tried[best[1]]:
            best = (one, recipe, folder, screened)
        if cfg.grid.flow != "classifier" or 2 * tried[recipe] >= len(screened):
            return one, recipe, folder, screened, tried
    return (*best, tried)


def recipe_overrides(cfg: GridConfig, recipe: str) -> dict:
    """The task overrides with a recipe's values where they set the same keys."""
    keys = with_recipe({"task_overrides": cfg.grid.task_overrides}, recipe)
    return {"task_overrides": keys.get("task_overrides", {})}


def absorbed_text(found: dict) -> str:
    from harness.stats import control

    return control.absorbed_numbers(found)


def absorption(folder: Path, tasks: list[str]) -> dict | None:
    """The manipulation check over the pilot units of `tasks` (None where they recorded none)."""
    from harness.stats import control  # scipy: loaded where a pilot reads its units, not for --help

    units = [u for u in control.unit_controls(folder) if u["task"] in tasks and "leak" in u]
    if len(units) < 2:
        return None
    found = control.control_of({"leak_mean": 0.0}, folder)["control"]
    return found if "checked" in found else None


def per_task_after_bh(alpha: float, sides: str, subsamples: int, tasks: int) -> bool:
    """Whether a task's own test, alone among `tasks`, can reject after BH at `subsamples` units: its
    smallest sign-flip p (2^-u, twice that two-sided) times the tasks."""
    return (2.0 if sides == "two" else 1.0) * 0.5**subsamples * tasks <= alpha


def sized(cfg: GridConfig, bias: np.ndarray, entered: int) -> dict[str, Any]:
    """The plan's units from the pilot's spread: K for the bound, a task's floor, rounded up to whole
    subsamples a task."""
    p = cfg.plan
    sd = float(np.std(bias, ddof=1)) if len(bias) > 1 else float("nan")
    if not math.isfinite(sd):
        raise UserError(
            "the pilot needs at least 2 units of entered tasks to read a spread: add --subsamples"
        )
    if sd == 0:
        raise UserError(
            f"the {len(bias)} pilot units of the entered tasks all have the same bias ({bias[0]:+.2f} "
            "points): a spread of 0 sizes no plan (every K would look enough); add --subsamples"
        )
    for_bound = units_for_bound(sd, p.equivalence_bound, p.alpha, POWER, p.sides)
    floor = per_task_floor(p.alpha, p.sides)
    each = max(floor, math.ceil(for_bound / entered))
    return {
        "sd": sd,
        "units_for_bound": for_bound,
        "task_floor": floor,
        "subsamples": each,
        "units": each * entered,
        "mde": mde_at(sd, each * entered, p.alpha, POWER, p.sides),
        "per_task_after_bh": per_task_after_bh(p.alpha, p.sides, each, entered),
    }


def leak_at(cfg: GridConfig, strength: int, leak: np.ndarray, units: int, absorbed=None) -> Leak:
    """The leak's power at K, one-sided (a leak is asked whether it raised the score), from the lower
    bound of its pilot mean."""
    from scipy import stats

    sd = float(np.std(leak, ddof=1)) if len(leak) > 1 else float("nan")
    mean = float(np.mean(leak))
    if not math.isfinite(sd) or sd == 0:
        return Leak(strength, len(leak), mean, sd, 0.0, float("nan"), 0.0, absorbed)
    low = mean - float(stats.t.ppf(0.95, len(leak) - 1)) * sd / math.sqrt(len(leak))
    power = power_at(low, sd, units, cfg.plan.alpha, "one")
    return Leak(
        strength, len(leak), mean, sd, power, low, power_at(mean, sd, units, cfg.plan.alpha, "one"), absorbed
    )


def run_pilot(
    opts: PilotOptions, cfg: GridConfig, given: dict, execute=None, threads: int = 0, say=print
) -> dict:
    """Run the pilot of `cfg` (its seed the pilot's) and write the plan; returns what it found (also
    written to <out>/pilot.json). `given`: the config keys set on the command line, kept in the plan
    but for where the pilot reads and writes."""
    if len(cfg.run_configs()) != 1:
        raise SettingsError("a pilot sizes one cell and one method: name one (m, n, method) in the config")
    if opts.plan_seed == cfg.sample.seed:
        raise SettingsError(
            f"--plan-seed {opts.plan_seed} is the pilot's own seed: the plan needs one it never used"
        )
    if abs(opts.plan_seed - cfg.sample.seed) < SEED_GAP:
        raise SettingsError(
            f"--plan-seed {opts.plan_seed} is within {SEED_GAP} of the pilot's seed {cfg.sample.seed}: a "
            "unit's training seed is its run's seed plus its subsample, so the plan's units would share "
            f"seeds with the pilot's; pick one at least {SEED_GAP} away"
        )
    strengths = sorted(set(opts.strengths))
    if not strengths or strengths[0] < 1:
        raise SettingsError(f"--strengths must be whole numbers of at least 1, got {opts.strengths}")
    target = Path(opts.plan)
    if target.is_dir():
        raise UserError(f"--plan {target} is a folder: name the plan's file, such as {target / 'plan.yaml'}")
    if target.exists() and MARK not in target.read_text(errors="replace")[:200]:
        raise UserError(
            f"--plan {target} exists and is not a plan `tapt-bench pilot` wrote: name another file, or "
            "remove it yourself"
        )
    if target.exists() and not opts.overwrite:
        raise UserError(f"{target} exists: name another --plan, or pass --overwrite to replace it")
    unknown = sorted(set(opts.head_recipes) - set(HEAD_RECIPES))
    if unknown or not opts.head_recipes:
        raise SettingsError(f"--head-recipes {unknown or '(none)'}: name some of {', '.join(HEAD_RECIPES)}")
    cfg, recipe, first, screened, tried = choose_recipe(opts, cfg, strengths[0], execute, threads, say)
    out = recipe_folder(Path(cfg.grid.out), "study")
    entered = [s.task for s in screened if s.entered]
    if not entered:
        raise UserError(f"no task passed the screen ({RULE}): no plan can read a bias")
    size = sized(cfg, differences(first, "bias", entered), len(entered))
    say(
        f"bias (test - extra) over {len(entered)} entered tasks' pilot units: sd {size['sd']:.2f} pts; "
        f"{size['units_for_bound']} units see {cfg.plan.equivalence_bound:g} pts with 80% power; "
        f"{size['subsamples']} a task (a task's own test needs {size['task_floor']}): K {size['units']}, "
        f"MDE {size['mde']:.2f} pts"
    )
    leaks, folder = [], first
    for strength in strengths:
        if strength != strengths[0]:
            folder = pilot_run(cfg, strength, recipe_folder(out, recipe), entered, execute, threads)
        absorbed = absorption(folder, entered)
        found = leak_at(cfg, strength, differences(folder, "leak", entered), size["units"], absorbed)
        leaks.append(found)
        say(
            f"leak strength {strength}: leak - extra {found.mean:+.2f} pts (sd {found.sd:.2f}, one-sided 95% "
            f"lower bound {found.low:+.2f}) over {found.units} units; power at K {size['units']} from the "
            f"lower bound: {found.power:.0%} (from the mean: {found.power_at_mean:.0%})"
            + (f"; manipulation check: {absorbed_text(absorbed)}" if absorbed else "")
        )
        if found.power >= POWER:
            break
    chosen = next((lk for lk in leaks if lk.power >= POWER), leaks[-1])
    seen = chosen.power >= POWER
    say(
        f"chosen: leak strength {chosen.strength}"
        + (
            ""
            if seen
            else f" (the strongest tried; its pooled leak is seen with {chosen.power:.0%} power, not 80%)"
        )
    )
    found = {
        "rule": RULE,
        "head_recipe": recipe,
        "head_recipes_tried": tried,
        "pilot_seed": cfg.sample.seed,
        "plan_seed": opts.plan_seed,
        "screen": [asdict(s) for s in screened],
        "entered": entered,
        **size,
        "leaks": [asdict(lk) for lk in leaks],
        "strength": chosen.strength,
        "leak_seen_with_power": seen,
    }
    results.write_json(results.pilot_path(out), found)
    write_plan(opts, cfg, given, found)
    say(
        f"plan: {target} ({size['subsamples']} subsamples of {len(entered)} tasks, seed {opts.plan_seed}); "
        "commit it before its first unit"
    )
    return found


PILOT_ONLY = ("seed", "subsamples", "out", "data_dir", "include_path", "confirmatory", "cells")


MARK = "A confirmatory plan written by `tapt-bench pilot"  # a plan file's first words: --overwrite's own


def write_plan(opts: PilotOptions, cfg: GridConfig, given: dict, found: dict) -> None:
    """The study's config file with the pilot's plan in it, checked as a config, then written."""
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
