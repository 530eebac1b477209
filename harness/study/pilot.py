"""The pilot that sizes a confirmatory plan (`tapt-bench pilot`): it runs a study's config on a seed the plan
never uses, and writes the plan.

1. Every task, at the first leak strength: units of base, extra, test and the planted leak.
2. The screen, by a rule fixed here before any bias is read: a task enters where its base beats chance on
   train's and extra's documents (never test's), a one-sided binomial test at ALPHA. Chance is what always
   answering a split's most frequent class gets right (the classifier flow), or the zero-shot screen's
   (harness.study.screen).
3. The spread: the per-unit sd of test - extra over the entered tasks' units. The plan's units K: the
   fewest whose paired test sees the plan's bound with 80% power (core/design/power.py), at least enough a
   task for a task's own sign-flip test to reject.
4. The leak: each strength in turn (the entered tasks alone after the first), until the pooled leak -
   extra over K units is seen with 80% power; the first such strength is the plan's.

The plan file is the study's config with those values, its power calculation in its header; commit it
before its first unit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from harness import results
from harness.core.design import conditions
from harness.core.design.power import POWER
from harness.core.plumbing.errors import SettingsError, UserError
from harness.core.plumbing.settings import Settings, option
from harness.grid.configuration import plan, resolve
from harness.grid.configuration.config import GridConfig
from harness.grid.execution.run import run
from harness.study.head_recipes import HEAD_RECIPES, recipe_folder, recipe_text, with_recipe
from harness.study.pilot_screen import RULE, screen
from harness.study.plan_file import MARK, write_plan
from harness.study.sizing import absorbed_text, absorption, differences, leak_at, sized

# a confirmatory plan's seed must stay this far from its pilot's: the classifier stream of unit k is
# seed + k, so two seeds closer than the units' count share a unit's training seed (harness.core.design.seeds)
SEED_GAP = 1000


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


def run_pilot(
    opts: PilotOptions, cfg: GridConfig, given: dict, execute=None, threads: int = 0, say=print
) -> dict:
    """Run the pilot of `cfg` (its seed the pilot's) and write the plan; returns what it found (also
    written to <out>/pilot.json). `given`: the config keys set on the command line, kept in the plan
    but for where the pilot reads and writes."""
    strengths = checked(opts, cfg)
    cfg, recipe, first, screened, tried = choose_recipe(opts, cfg, strengths[0], execute, threads, say)
    out = recipe_folder(Path(cfg.grid.out), "study")
    entered = [s.task for s in screened if s.entered]
    if not entered:
        raise UserError(f"no task passed the screen ({RULE}): no plan can read a bias")
    size = sized(cfg, differences(first, conditions.PRIMARY, entered), len(entered))
    say(
        f"{conditions.label(conditions.PRIMARY, ' - ')} over {len(entered)} entered tasks' pilot units: "
        f"sd {size['sd']:.2f} pts; "
        f"{size['units_for_bound']} units see {cfg.plan.equivalence_bound:g} pts with 80% power; "
        f"{size['subsamples']} a task (a task's own test needs {size['task_floor']}): K {size['units']}, "
        f"MDE {size['mde']:.2f} pts"
    )

    def run_at(strength: int) -> Path:  # the first strength's units are the screen's
        folder = recipe_folder(out, recipe)
        return (
            first if strength == strengths[0] else pilot_run(cfg, strength, folder, entered, execute, threads)
        )

    leaks = leak_search(cfg, strengths, run_at, entered, size["units"], say)
    chosen = next((lk for lk in leaks if lk.power >= POWER), leaks[-1])
    seen = chosen.power >= POWER
    tail = (
        ""
        if seen
        else f" (the strongest tried; its pooled leak is seen with {chosen.power:.0%} power, not 80%)"
    )
    say(f"chosen: leak strength {chosen.strength}{tail}")
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
        f"plan: {opts.plan} ({size['subsamples']} subsamples of {len(entered)} tasks, seed "
        f"{opts.plan_seed}); commit it before its first unit"
    )
    return found


def leak_search(cfg: GridConfig, strengths: list[int], run_at, entered: list[str], units: int, say) -> list:
    """Each leak strength in turn (`run_at(strength)`: its model folder), until the plan's K units see its
    pooled leak - extra with 80% power from its lower bound; each with its manipulation check."""
    leaks = []
    for strength in strengths:
        folder = run_at(strength)
        absorbed = absorption(folder, entered)
        found = leak_at(cfg, strength, differences(folder, conditions.PLANTED, entered), units, absorbed)
        leaks.append(found)
        say(
            f"leak strength {strength}: leak - extra {found.mean:+.2f} pts (sd {found.sd:.2f}, one-sided 95% "
            f"lower bound {found.low:+.2f}) over {found.units} units; power at K {units} from the "
            f"lower bound: {found.power:.0%} (from the mean: {found.power_at_mean:.0%})"
            + (f"; manipulation check: {absorbed_text(absorbed)}" if absorbed else "")
        )
        if found.power >= POWER:
            break
    return leaks


def head(path: Path, size: int = 200) -> str:
    """A file's first `size` bytes as text (never the whole of a file that may be large)."""
    with path.open("rb") as f:
        return f.read(size).decode(errors="replace")


def checked(opts: PilotOptions, cfg: GridConfig) -> list[int]:
    """The pilot's options checked against its config before any unit: its strengths, in order."""
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
    problem = results.file_problem(
        target, "plan.yaml"
    )  # a device or a pipe: never read (/dev/full reads forever)
    if problem:
        raise UserError(f"--plan: {problem}")
    if target.exists() and MARK not in head(target):
        raise UserError(
            f"--plan {target} exists and is not a plan `tapt-bench pilot` wrote: name another file, or "
            "remove it yourself"
        )
    if target.exists() and not opts.overwrite:
        raise UserError(f"{target} exists: name another --plan, or pass --overwrite to replace it")
    problem = opts.plan_out and results.folder_problem(Path(opts.plan_out))  # the plan's own folder
    if problem:
        raise UserError(f"--plan-out: {problem}")
    unknown = sorted(set(opts.head_recipes) - set(HEAD_RECIPES))
    if unknown or not opts.head_recipes:
        raise SettingsError(f"--head-recipes {unknown or '(none)'}: name some of {', '.join(HEAD_RECIPES)}")
    return strengths
