"""How a study's run goes, above the grid and the statistics (which do not import each other): a
confirmatory plan is screened first and run in rounds, never stopped on its data; `--until-mde` runs a
grid in rounds, one subsample of every task per method a round, each method stopped once its pooled MDE
is at most the target (never on its p-value), reading the summary between rounds; otherwise each cell
and method runs whole. Whenever a run stops, its methods hold the same subsamples."""

from __future__ import annotations

import math
from collections.abc import Callable

from harness import results
from harness.core.design.conditions import PRIMARY
from harness.core.plumbing.errors import SettingsError
from harness.grid.configuration import resolve
from harness.grid.configuration.config import GridConfig
from harness.results import collect
from harness.stats.summary.summary import summarize
from harness.stats.summary.verdict import key


def prepared(cfg: GridConfig, until_mde: float | None) -> GridConfig:
    """The study's config as it runs: a confirmatory plan's tasks screened (zero-shot), before any unit;
    `--until-mde` on a plan refused."""
    if until_mde and cfg.plan.confirmatory:
        raise SettingsError(
            "--until-mde stops a method once its MDE reaches a target, which reads its data; a confirmatory "
            "plan runs every planned unit and is never stopped on them: drop --until-mde"
        )
    if cfg.plan.confirmatory and cfg.grid.flow == "zero_shot":
        from harness.study.screen import screened

        return screened(cfg)
    return cfg


def run_study(
    cfg: GridConfig, until_mde: float | None, shards: int, run_one: Callable[[GridConfig, int | None], object]
) -> None:
    """Run a prepared config's cells and methods (`run_one(config, upto)`): in rounds for `--until-mde` and
    for a whole (unsharded) confirmatory plan, else each whole, one after another."""
    if until_mde or (cfg.plan.confirmatory and shards == 1):
        run_rounds(cfg, None if cfg.plan.confirmatory else until_mde, run_one)
        return
    for one in cfg.run_configs():  # one cell and one method (and dose) each
        run_one(one, None)


def pooled(cfg: GridConfig) -> tuple[float, int]:
    """A method's pooled MDE (in points) and units so far; inf and 0 before it has any."""
    mdir = resolve.folder(cfg)
    if results.any_unit(mdir) is None:
        return float("inf"), 0
    (config,) = [c for c in summarize(collect(mdir))["configs"] if c["model"] == resolve.tag(cfg)]
    mde = config[key(PRIMARY, "detectable")]  # NaN where the bias is uninformative: no MDE to stop at
    return (100 * mde if not math.isnan(mde) else float("inf")), config[key(PRIMARY, "units")]


def run_rounds(
    cfg: GridConfig, target: float | None, run_one: Callable[[GridConfig, int], object], say=print
) -> dict:
    """Run `cfg`'s cells and methods in rounds until each one's pooled MDE is at most `target` points, or
    it ran its config's subsamples; returns {"<model> m<m> n<n>": (MDE, units)} as they stand at the end.
    `target` None: every planned unit, never stopped on the data (a confirmatory plan), in rounds so that
    a run stopped early holds its methods on the same subsamples."""
    if target is None:  # the plan: no summary is read between rounds, so nothing of the data is seen
        for k in range(1, max(c.grid.subsamples for c in cfg.run_configs()) + 1):
            for c in cfg.run_configs():
                if k <= c.grid.subsamples:
                    say(f"round {k} of the plan: {resolve.tag(c)} (m {c.sample.m}, n {c.sample.n})")
                    run_one(c, k)
        return {}
    open_, out = cfg.run_configs(), {}
    for k in range(1, max(c.grid.subsamples for c in open_) + 1):
        for c in list(open_):
            mde, units = pooled(c)
            if mde <= target or k > c.grid.subsamples:
                why = (
                    f"MDE {mde:.2f} pts over {units} units"
                    if mde <= target
                    else f"its {c.grid.subsamples} subsamples"
                )
                say(f"{resolve.tag(c)} (m {c.sample.m}, n {c.sample.n}): stops at {why}")
                open_.remove(c)
                out[f"{resolve.tag(c)} m{c.sample.m} n{c.sample.n}"] = (mde, units)
                continue
            say(
                f"round {k}: {resolve.tag(c)} (m {c.sample.m}, n {c.sample.n}), MDE so far {mde:.2f} pts "
                f"over {units} units"
            )
            run_one(c, k)  # its first k subsamples: the config, and what its units record, stay whole
        if not open_:
            break
    for c in open_:
        mde, units = pooled(c)
        met = "at most" if mde <= target else "still above"
        say(
            f"{resolve.tag(c)} (m {c.sample.m}, n {c.sample.n}): MDE {mde:.2f} pts over {units} units, "
            f"{met} {target:g}"
        )
        out[f"{resolve.tag(c)} m{c.sample.m} n{c.sample.n}"] = (mde, units)
    return out
