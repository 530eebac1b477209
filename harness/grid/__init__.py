"""The experiment grid: a config, its (task, subsample) units, and running them locally, in worker
processes or on Ray, into the results layout. Its inside is in layers: `grid_settings` <- `unit` <-
`configuration` <- `execution` (pyproject.toml's contracts). The modules that moved when the grid was
split keep their old names for one release, with a DeprecationWarning (harness.core.moved)."""

from harness.core.moved import keep_old_names

CONFIGURATION = ("config", "study_layout", "resolve", "run_checks", "plan")
UNIT = ("unit_plan", "unit_record", "flow", "flows", "stream", "base_model", "fingerprints")
EXECUTION = ("run", "pool", "on_ray", "lock", "merge", "worker_messages", "folder_checks")
STUDY = ("calibrate", "null_models", "screen", "pilot")
keep_old_names(
    __name__,
    {m: f"harness.grid.configuration.{m}" for m in CONFIGURATION}
    | {m: f"harness.grid.unit.{m}" for m in UNIT}
    | {m: f"harness.grid.execution.{m}" for m in EXECUTION}
    | {m: f"harness.study.{m}" for m in STUDY},
)
