"""The front door: one Python call for each thing a study does, as `tapt-bench` does it (the CLI parses its
flags, calls these and prints what they return). Each takes a config (a YAML file, a shipped config's name,
or a loaded GridConfig) and settings by keyword: the command's own (`workers=2`, as `--workers 2`) or any
config key (`subsamples=3`, which overrides the file's, as its flag does).

    import harness
    ran = harness.run("demo", data_dir="../shared/data")
    print(harness.summarize(ran.out).text())
    harness.report(ran.out)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from harness.core.plumbing.errors import SettingsError
from harness.core.plumbing.settings import did_you_mean, field_names
from harness.grid.configuration.config import GridConfig
from harness.study.run_options import RunOptions


@dataclass(frozen=True)
class Ran:
    """A run: the config's results folder, the task folders this call wrote, the options it ran with, and
    (`models`) its models' (m, n, folder name)."""

    out: Path
    config: GridConfig
    task_dirs: list[Path] = field(default_factory=list)
    options: RunOptions | None = None

    @cached_property
    def models(self) -> tuple[tuple[int, int, str], ...]:
        from harness.grid.configuration import resolve

        return tuple((c.sample.m, c.sample.n, resolve.folder(c).name) for c in self.config.run_configs())

    def summary(self):
        """The run's own models read together (its family, as its plan names it)."""
        return summarize(self.out, models=self.models)


@dataclass(frozen=True)
class Report:
    path: Path
    size: int  # bytes


@dataclass(frozen=True)
class Pilot:
    plan: Path
    found: dict  # also <out>/pilot.json: the screen, the spread, the leaks tried, the chosen strength


@dataclass(frozen=True)
class Calibration:
    path: Path
    result: dict  # error rates overall and per task, the p-values read, notes, seconds


def split(cls: type, config, settings: dict, **fixed) -> tuple:
    """`settings` parted into the command's options (`cls`, built and checked) and config keys; a key that
    is neither is refused with its nearest spelling."""
    own = set(field_names(cls)) - {"config"}
    keys = set(field_names(GridConfig))
    unknown = sorted(set(settings) - own - keys)
    if unknown:
        raise SettingsError(
            f"{unknown[0]!r} is neither a setting of this call ({', '.join(sorted(own))}) nor a config "
            f"key{did_you_mean(unknown[:1], sorted(own | keys))}"
        )
    named = config if isinstance(config, (str, Path)) else "<GridConfig>"
    opts = cls(config=str(named), **{k: v for k, v in settings.items() if k in own}, **fixed)
    return opts, {k: v for k, v in settings.items() if k in keys and k not in own}


def study_config(config: str | Path | GridConfig, keys: dict) -> GridConfig:
    """A config read (a file or a shipped name, `keys` over it) and checked as a run checks it."""
    from harness.grid.configuration import run_checks

    if isinstance(config, GridConfig):
        cfg = config.replace(**keys) if keys else config
        run_checks.check_run(cfg)
        return cfg
    return run_checks.load_run(config, keys)


def run(config: str | Path | GridConfig, **settings) -> Ran:
    """Run every unit of a config (every cell and method) that is not finished; resumes where it stopped.
    Settings: `tapt-bench run`'s (shard "i/N", workers, threads, keep_adapters, overwrite, ray, until_mde,
    ...) and config keys."""
    from harness.grid.configuration import plan
    from harness.grid.execution import run as grid_run
    from harness.study import rounds
    from harness.study.run_options import executor

    opts, keys = split(RunOptions, config, settings)
    shard = opts.shard_pair()
    cfg = rounds.prepared(study_config(config, keys), opts.until_mde)
    wrote: list[Path] = []
    with executor(opts) as execute:

        def run_one(one, upto: int | None = None) -> None:  # planned here: study_config checked the run
            wrote.extend(
                grid_run.run(
                    plan.run_plan(one), shard, opts.keep_adapters, opts.overwrite, execute, opts.threads, upto
                )
            )

        rounds.run_study(cfg, opts.until_mde, shard[1], run_one)
    return Ran(Path(cfg.grid.out), cfg, wrote, opts)


def merge(sources: list[str | Path], out: str | Path) -> list[Path]:
    """Combine the finished units of shard runs into one folder and rebuild its tables; the task folders
    written. Shards run with other settings or inputs are refused."""
    from harness.grid.execution.merge import merge as merged

    return merged([Path(s) for s in sources], Path(out))


def summarize(
    results: str | Path,
    *,
    seed: int = 0,
    target: float | None = None,
    sides: str | None = None,
    family: str | None = None,
    alpha: float | None = None,
    tasks: list[str] | None = None,
    statistics: list[str] = (),
    models: tuple | None = None,
):
    """A results folder's summary (a Summary: `.tables`, `.text()`, `.to_dict()`). `target`: the bias in
    points the study means to see; `sides`, `family`, `alpha`: for a folder whose run declared no plan;
    `tasks`: these alone (post hoc); `statistics`: plug-in statistics to read beside the built-ins."""
    from harness.core.design.power import TARGET
    from harness.stats.summary.summary import of_folder
    from harness.study.summary_view import Summary

    load_statistics(list(statistics))
    root = Path(results).expanduser()
    if alpha is not None and not alpha < 0.5:
        raise SettingsError(f"--alpha must be below 0.5 (a test's level), got {alpha}")
    chosen = {"sides": sides, "family": family, "alpha": alpha, "equivalence_bound": target}
    level = TARGET if target is None else target / 100
    tables = of_folder(root, seed, level, chosen=chosen, tasks=tasks, models=list(models) if models else None)
    return Summary(root, tables, tuple(models) if models else None)


def report(
    results: str | Path,
    out: str | Path | None = None,
    *,
    analysis: str | None = None,
    analyze: bool = False,
    statistics: list[str] = (),
) -> Report:
    """One self-contained HTML page of a results folder (default <results>/report.html); `analysis`: the
    file `analyze --out` wrote, whose fits it shows; `analyze`: fit them here (slow on big grids)."""
    from harness.study.report_file import write_report

    load_statistics(list(statistics))
    return Report(*write_report(Path(results).expanduser(), out, analysis, analyze))


def pilot(config: str | Path | GridConfig, **settings) -> Pilot:
    """Run a study's pilot (its config's seed) and write the confirmatory plan it sizes. Settings:
    `tapt-bench pilot`'s (plan, plan_seed, strengths, head_recipes, workers, threads, ...) and config keys,
    which the plan keeps."""
    from harness.study.pilot import PilotOptions, run_pilot
    from harness.study.run_options import executor

    opts, keys = split(PilotOptions, config, settings)
    if "leak_strength" in keys:  # the pilot sets it itself, one strength after another
        raise SettingsError(
            f"--leak-strength {keys['leak_strength']}: the pilot tries each of --strengths in turn and "
            f"writes the one it chose into the plan; name them there (--strengths {keys['leak_strength']})"
        )
    cfg = study_config(config, keys)
    with executor(RunOptions(config=opts.config, workers=opts.workers, threads=opts.threads)) as execute:
        found = run_pilot(opts, cfg, keys, execute, opts.threads)
    return Pilot(Path(opts.plan), found)


def calibrate(config: str | Path | GridConfig, **settings) -> Calibration:
    """Every detector's false-positive rate and power on models of known exposure: trains (or resumes) a
    grid per TAPT mode, with the exposure test on. Settings: `contamination calibrate`'s and config keys."""
    from harness.results import calibration_path
    from harness.study.calibrate import CalibrateOptions
    from harness.study.calibrate import calibrate as calibrated

    opts, keys = split(CalibrateOptions, config, settings)
    cfg = study_config(config, {**keys, "exposure": True})  # CoDeC and scores are read within it
    return Calibration(calibration_path(cfg.grid.out), calibrated(cfg, opts))


STATISTICS_HELP = (
    "your summary statistics, read beside the built-ins: my_stats.py:NAME (a Statistic), or a file or "
    "module that registers them as it loads (harness.api.register)"
)


def load_statistics(targets: list[str]) -> None:
    """Each statistic named: `file.py:NAME` (a Statistic), or a file or module that registers its statistics
    as it loads."""
    from harness.stats.summary.statistics import STATISTICS, register

    fix = "name its statistic as FILE.py:NAME, or call harness.api.register(Statistic(...)) in it"
    for target in targets:
        STATISTICS.load(target, "--statistics", fix, lambda s, attr: register(s))
