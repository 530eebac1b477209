"""calibrate's null models: per unit, the unit's method adapted on a third draw of the pool (neither
test nor extra), kept beside the unit as <task dir>/null/<k>.json and read into its exposure record."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from contamination.exposure import condition_tests
from harness import results
from harness.core.design import seeds
from harness.core.design.conditions import BASE, NULL
from harness.core.plumbing.errors import UserError, read_json_object
from harness.grid.configuration.config import GridConfig
from harness.grid.configuration.plan import RunPlan
from harness.grid.execution import run as grid_run
from harness.grid.unit import flow
from harness.grid.unit.unit_plan import UnitKey, UnitPlan
from harness.grid.unit.unit_record import Step


def added(cfg: GridConfig, slug: str, k: int, unit: dict, run: RunPlan | None) -> tuple[dict, str | None]:
    """The unit's exposure record with its null model's beside the other conditions' (as it was where
    there is none and no run plan `run` is given to train it from, or where the null model was not
    adapted), and why it was not adapted (None where it was, or where there is none)."""
    tdir = grid_run.task_dir(cfg, slug)
    null = record(slug, k, unit, run, tdir)
    if null is None:
        return unit["exposure"], None
    if null.get("not_adapted"):  # the base again, not a model adapted on other text: left out
        return unit["exposure"], null["not_adapted"]
    seed = seeds.derive(cfg.sample.seed, k, "exposure")
    return with_null(unit["exposure"], null, seed, str(results.null_model_path(tdir, k))), None


def record(slug: str, k: int, unit: dict, run: RunPlan | None, tdir: Path) -> dict | None:
    """The unit's null model (its flow's null_model) as its exposure scores and training record: read from
    its file in the unit's task folder `tdir`, else trained from the run's plan and written there (None
    where no plan is given)."""
    path = results.null_model_path(tdir, k)
    if path.is_file():
        null = read_json_object(path, str(path), "delete it to train the null model again")
        if null.get("settings_hash") != unit["settings_hash"]:
            raise UserError(
                f"{path}: a null model of other settings than unit {k} beside it (settings_hash "
                f"{null.get('settings_hash')} against {unit['settings_hash']}); delete it to train it again"
            )
        return null
    if run is None:
        return None
    table = pd.read_parquet(results.unit_paths(tdir, k)[1])
    step = null_model(run.unit(UnitKey(slug, k)), table[table["condition"] == BASE])
    null = {
        "settings_hash": unit["settings_hash"],
        "scores": step.exposed.to_dict("list"),
        "accuracy": float(step.scored["correct"].mean()),
        "training": step.training,
        "not_adapted": step.skipped,
        "seconds": step.seconds,
    }
    results.write_json(path, null)
    return null


def null_model(unit: UnitPlan, base_scored: pd.DataFrame) -> Step:
    """The unit's method adapted on a third draw of the pool (its flow's null model), scored as every
    condition is."""
    served = flow.get(unit.grid.flow)
    if served.null_model is None:
        raise UserError(f"the {served.name} flow has no null model")
    return served.null_model(unit, base_scored)


def with_null(record: dict, null: dict, seed: int, where: str) -> dict:
    """The unit's exposure record with the null model's scores and its tests against the base beside the
    other conditions'."""
    scores = pd.DataFrame(null["scores"])
    if list(scores["row"]) != record["docs"]["row"] or list(scores["split"]) != record["docs"]["split"]:
        raise UserError(f"{where}: its documents are not the unit's; delete it to train the null model again")
    base = pd.DataFrame(record["scores"][BASE]).assign(**record["docs"])
    both = condition_tests({BASE: base, NULL: scores}, BASE, record["text_score"], seed)
    return {
        **record,
        "scores": {**record["scores"], NULL: both["scores"][NULL]},
        "tests": {**record["tests"], NULL: both["tests"][NULL]},
    }
