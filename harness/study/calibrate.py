"""`tapt-bench contamination calibrate`: every detector's error rates on models of known exposure.

For each TAPT mode (padding, packing; a method without a `packing` setting, such as TLM, has one mode,
`default`) and each method of the config a grid of the config's tasks and subsamples trains, per unit, the
extra, test and leak models with the exposure setting on; every detector of contamination.detectors
reads each model's scores, and (optionally) the exchangeability test of Oren et al. runs on each
model in both formats. The flag rates on the models that did not see the test split (or its labels)
are the false positives; on those that did, the power. The extra model saw the reference side, which
tilts a one-sided test toward "not seen"; so each unit also gets a null model, adapted on a third draw
of the pool that is neither test nor extra, whose flags are the false positives of a model that saw
neither side (the `null` column). Resumable: the grids skip finished units, the null models are kept
in <task dir>/null/<k>.json, the exchangeability p-values in <out>/exchangeability.json; the table is
written to <out>/calibration.json (results.calibration_path).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from contamination import detectors
from contamination.exchangeability_run import examples, sharded_test
from harness import results
from harness.core.design import conditions
from harness.core.engine import models
from harness.core.engine.models import load_scoring_model
from harness.core.plumbing.errors import SettingsError, UserError, read_json_object
from harness.core.plumbing.settings import Settings, field_names, option
from harness.grid.configuration import plan, resolve
from harness.grid.configuration.config import GridConfig
from harness.grid.execution import run as grid_run
from harness.grid.unit import flow
from harness.study import null_models
from harness.tasks.protocol import find_spec, subsample_docs

FORMATS = {"labeled": detectors.LABELS, "text-only": detectors.TEXT}  # what each exchangeability test sees
MODES = ("padding", "packing")  # the TAPT modes: the adapter setting `packing` off and on
DEFAULT = "default"  # the one mode of a method that has no `packing` setting


@dataclass(kw_only=True)
class CalibrateOptions(Settings):
    """How `contamination calibrate` runs (what it trains is the grid config's)."""

    MINIMUM = {"shards": 2, "permutations": 1, "until_mde": 0.0}

    config: str = option(help="grid config YAML, or a shipped config's name (calibrate, demo, ...)")
    modes: list[str] = option(list(MODES), f"the TAPT modes to calibrate, of {list(MODES)}")
    exchangeability: bool = option(
        False, "also run the exchangeability test (both formats) on every model: the slow part"
    )
    shards: int = option(4, "exchangeability test: shards")
    permutations: int = option(10, "exchangeability test: random orders per shard")
    keep_adapters: bool = option(False, "keep every adapter (the exchangeability test keeps them anyway)")
    train: bool = option(
        True,
        "train the units the grids lack; false: read only the finished ones (a study still running, or "
        "stopped short of its subsamples)",
    )
    detectors: list[str] = option(
        [],
        "your detectors, read beside the built-ins: my_check.py:NAME (a Detector), or a file or module "
        "that registers them as it loads (my_check.py)",
    )
    until_mde: float = option(
        0.0,
        "train a method's missing units as `run --until-mde` does: in rounds, stopped once its pooled MDE is "
        "at most this many points; on a study run so, no unit it did not run, only the null models. 0: "
        "every subsample of the config",
    )
    null_model: bool = option(
        True,
        "per unit, also adapt the method on a third draw of the pool (neither test nor extra) and read every "
        "detector's false positives on it, a model that saw neither side (one more training a unit)",
    )

    def check(self) -> None:
        super().check()
        unknown = [m for m in self.modes if m not in MODES]
        if unknown or not self.modes:
            problem = f"must be some of {list(MODES)}, got {self.modes}"
            raise SettingsError.of("modes", problem)


def modes_of(cfg: GridConfig, opts: CalibrateOptions) -> list[str]:
    """The modes calibrated for the config's method: the options' where it has a `packing` setting."""
    return opts.modes if "packing" in field_names(cfg.adaptation().settings) else [DEFAULT]


def mode_config(cfg: GridConfig, mode: str) -> GridConfig:
    """The grid of one mode: the leak added to the config's conditions, the exposure setting on, in
    <out>/<mode>; or in <out> itself where a grid run there (`tapt-bench run` of a config with the leak
    and the exposure test, such as a methods study) already holds units of exactly these settings: they
    are read, and only the units it lacks are computed, into the same folder."""
    with_leak = [c for c in conditions.ALL if c in (*cfg.grid.conditions, conditions.LEAK)]  # stream as given
    changes = {"conditions": with_leak, "exposure": True}
    if mode != DEFAULT:  # packing is one of the method's settings
        name = cfg.adaptation().name
        own = cfg.grid.method_settings.get(name, {}) | {"packing": mode == "packing"}
        changes["method_settings"] = {**cfg.grid.method_settings, name: own}
    grid = cfg.replace(**changes)
    return grid if ran_here(grid) else grid.replace(out=str(Path(cfg.grid.out) / mode))


def ran_here(cfg: GridConfig) -> bool:
    """Whether cfg's own folder holds a finished unit of cfg's settings."""
    want = resolve.settings_hash(cfg)
    return any(
        unit.get("settings_hash") == want
        for slug in cfg.slugs
        for unit in results.finished(grid_run.task_dir(cfg, slug)).values()
    )


def units_of(cfg: GridConfig, tdir: Path) -> dict[int, dict]:
    """The config's finished units in a task dir (a folder may hold more subsamples than it asks for)."""
    return {k: u for k, u in sorted(results.finished(tdir).items()) if k < cfg.grid.subsamples}


def unit_rows(
    cfg: GridConfig, mode: str, with_nulls: bool = False, train: bool = False, unadapted: dict | None = None
) -> list[dict]:
    """Every detector's p-value for every finished unit and condition of one mode's grid, with the null
    model's where `with_nulls` (trained where missing and `train`); a null model that was not adapted is
    left out, and why is put in `unadapted` by (task, subsample)."""
    rows, method = [], cfg.adaptation().name
    run = plan.run_plan(cfg) if with_nulls and train else None  # planned once: every null model reads it
    for slug in cfg.slugs:
        spec = find_spec(slug, cfg.sample.include_path)
        for k, unit in units_of(cfg, grid_run.task_dir(cfg, spec.slug)).items():
            record = unit["exposure"]
            if with_nulls:
                record, why = null_models.added(cfg, spec.slug, k, unit, run)
                if why and unadapted is not None:
                    unadapted[(spec.slug, k)] = why
            docs = subsample_docs(spec, cfg.sample, k)
            text = {
                (s, r): t
                for s in (conditions.TEST, conditions.EXTRA)
                for r, t in zip(docs[s]["row"], docs[s]["text"])
            }
            texts = [text[(s, r)] for s, r in zip(record["docs"]["split"], record["docs"]["row"])]
            for row in detectors.unit_pvalues(record, texts):
                rows.append({"method": method, "mode": mode, "task": spec.slug, "subsample": k, **row})
    return rows


def exchangeability_rows(cfg: GridConfig, mode: str, opts: CalibrateOptions, cache_path: Path) -> list[dict]:
    """The exchangeability test's p-value of both formats for every unit's models (kept adapters),
    cached by (mode, task, subsample, condition, format, shards, permutations)."""
    from peft import PeftModel

    fix = "delete it to compute the exchangeability p-values again"
    cache = read_json_object(cache_path, str(cache_path), fix) if cache_path.is_file() else {}
    for slug in cfg.slugs:  # every adapter the test reads, before the base is loaded
        tdir = grid_run.task_dir(cfg, find_spec(slug, cfg.sample.include_path).slug)
        for k in units_of(cfg, tdir):
            for cond in (c for c in cfg.grid.conditions if c not in (conditions.BASE, conditions.STREAM)):
                adapter = results.adapter_path(tdir, k, cond)
                if not adapter.is_dir():
                    raise UserError(
                        f"{adapter}: no adapter for the exchangeability test (the grid that made unit {k} "
                        f"did not keep its adapters): delete {tdir / 'units'} so that calibrate trains its "
                        "units again and keeps them, or drop --exchangeability"
                    )
    base, tokenizer = load_scoring_model(models.resolve(cfg.model.base))
    rows = []
    for slug in cfg.slugs:
        spec = find_spec(slug, cfg.sample.include_path)
        tdir = grid_run.task_dir(cfg, spec.slug)
        for k in units_of(cfg, tdir):
            test_docs = subsample_docs(spec, cfg.sample, k)[conditions.TEST]
            for cond in (c for c in cfg.grid.conditions if c != conditions.STREAM):  # one adapter a condition
                model = base
                if cond != conditions.BASE:
                    model = PeftModel.from_pretrained(base, results.adapter_path(tdir, k, cond))
                for fmt in FORMATS:
                    key = f"{mode}/{spec.slug}/{k}/{cond}/{fmt}/shards{opts.shards}/perms{opts.permutations}"
                    if key not in cache:
                        items = examples(spec, test_docs, fmt)
                        res = sharded_test(
                            model.eval(),
                            tokenizer,
                            items,
                            opts.shards,
                            opts.permutations,
                            context_len=1024,  # the study's windows, as `contamination test` defaults
                            stride=512,
                            seed=0,
                            batch_size=16,
                        )
                        cache[key] = res["pval"]
                        results.write_json(cache_path, cache)
                    rows.append(
                        {
                            "method": cfg.adaptation().name,
                            "mode": mode,
                            "task": spec.slug,
                            "subsample": k,
                            "condition": cond,
                            "detector": f"exchangeability ({fmt})",
                            "p": cache[key],
                        }
                    )
                if cond != conditions.BASE:
                    base = model.unload()
    return rows


def why_none(cfg: GridConfig, opts) -> str:
    """Where units of other settings lie under the config's out: how they differ from what calibrate
    reads (the leak and the exposure test, most often), or nothing."""
    from harness.core.plumbing.settings import differences

    found = next(iter(results.unit_files(cfg.grid.out)), None)
    if found is None:
        return ""
    want = resolve.recorded(mode_config(cfg.run_configs()[0], modes_of(cfg.run_configs()[0], opts)[0]))
    got = json.loads(found.read_text()).get("settings", {})
    changed = [d for d in differences(got, want) if not d.startswith(("exposure", "conditions"))][:3]
    ran, reads = (
        c.get("conditions", list(conditions.PAIRED)) for c in (got, want)
    )  # unrecorded: the default
    if ran != reads:
        changed.insert(0, f"conditions {ran} (calibrate reads {reads})")
    if not got.get("exposure"):
        changed.insert(0, "no exposure test (calibrate reads the exposure test of every model)")
    return f"; the units there, such as {found}, differ: " + "; ".join(changed) if changed else ""


def load_detectors(targets: list[str]) -> None:
    """The installed detector plug-ins, then each named: `file.py:NAME` (a Detector, named NAME unless it
    has a name), or a file or module that registers its detectors as it loads."""
    fix = "name its detector as FILE.py:NAME, or call register(Detector(...)) in it (docs/contamination.md)"
    for target in targets:
        detectors.DETECTORS.load(
            target, "detectors", fix, lambda d, attr: detectors.register(d.name or attr, d)
        )


def calibrate(cfg: GridConfig, opts: CalibrateOptions) -> dict:
    """Run (or resume) every mode's grid, read every detector, and write <out>/calibration.json. Where
    train is on, a mode's grid computes every unit it lacks, or with `--until-mde` runs in rounds, as
    `run --until-mde` runs a grid."""
    keep = opts.exchangeability or opts.keep_adapters

    def run_grid(grid: GridConfig) -> None:
        if not opts.until_mde:
            grid_run.run(grid, keep_adapters=keep)
            return
        from harness.study.rounds import run_rounds

        run_rounds(
            grid, opts.until_mde, lambda c, k: grid_run.run(plan.run_plan(c), keep_adapters=keep, upto=k)
        )

    started = time.perf_counter()
    load_detectors(opts.detectors)
    rows, notes = [], []
    for cell in cfg.run_configs():
        if modes_of(cell, opts) == [DEFAULT]:
            note = (
                f"{cell.adaptation().name} has no packing setting: its one mode ({DEFAULT}) is calibrated, "
                f"not {', '.join(opts.modes)}"
            )
            notes += [note] if note not in notes else []
        for mode in modes_of(cell, opts):
            grid = mode_config(cell, mode)
            if opts.train:
                run_grid(grid)
            with_nulls = opts.null_model and flow.get(grid.grid.flow).null_model is not None
            unadapted = {}
            read = unit_rows(grid, mode, with_nulls, opts.train, unadapted)
            rows += read
            notes += read_notes(cell, grid, mode, opts, with_nulls, read, unadapted)
            if opts.exchangeability:
                rows += exchangeability_rows(grid, mode, opts, results.exchangeability_path(cfg.grid.out))
    if not rows and not opts.train:
        raise UserError(
            f"nothing to calibrate under {cfg.grid.out}: no finished unit of these settings, and train is "
            f"false (read only){why_none(cfg, opts)}; drop `--train false` to train them"
        )
    sees = {name: d.sees for name, d in detectors.DETECTORS.items()}
    sees |= {f"exchangeability ({fmt})": what for fmt, what in FORMATS.items()}
    pvalues = pd.DataFrame(rows)
    out = {
        "settings": resolve.recorded(cfg) | {"tasks": cfg.grid.tasks, "subsamples": cfg.grid.subsamples},
        "options": dataclasses.asdict(opts),
        "rates": detectors.error_rates(pvalues, sees, ("method", "mode", "detector")),
        "rates_by_task": detectors.error_rates(pvalues, sees, ("method", "mode", "task", "detector")),
        "pvalues": pvalues.to_dict("records"),
        "notes": notes,
        "seconds": time.perf_counter() - started,
    }
    results.write_json(results.calibration_path(cfg.grid.out), out)
    return out


def read_notes(
    cell: GridConfig, grid: GridConfig, mode: str, opts, with_nulls: bool, read: list, unadapted: dict
) -> list[str]:
    """What a mode's reading says of itself: its null models (or the flow's lack of them), the units a
    null model did not move, and, read only, how many of the units were finished."""
    name, notes = cell.adaptation().name, []
    if opts.null_model and not with_nulls:
        notes.append(f"{name} ({mode}): no null model in the {grid.grid.flow} flow")
    elif with_nulls:
        units = {(r["task"], r["subsample"]) for r in read}
        nulls = {(r["task"], r["subsample"]) for r in read if r["condition"] == conditions.NULL}
        note = f"{name} ({mode}): a null model in {len(nulls)} of {len(units)} units"
        if unadapted:
            (task, k), why = next(iter(unadapted.items()))
            left = f"{len(unadapted)} more not adapted, left out of the null column"
            note += f"; {left} ({task} unit {k}: {why})"
        notes.append(note)
    if not opts.train:
        units = len({(r["task"], r["subsample"]) for r in read})
        notes.append(
            f"{name} ({mode}): read {units} finished of {len(cell.slugs) * cell.grid.subsamples} units, "
            "trained none"
        )
    return notes
