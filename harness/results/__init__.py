"""The results layout (the study's), written and read here only; every write is atomic.

    <out>/m<m>/n<n>/<model-tag>/<task>/accuracies.csv         one row per subsample, in index order
    <out>/m<m>/n<n>/<model-tag>/<task>/probabilities.parquet  per-example class probabilities
    <out>/m<m>/n<n>/<model-tag>/<task>/units/<k>.json|.parquet one finished (task, subsample) unit
    <out>/m<m>/n<n>/<model-tag>/manifest-shard<i>of<N>.json    a run's config, versions, units, earlier runs
    <out>/m<m>/n<n>/<model-tag>/logs/run-<time>-shard<i>of<N>.log
    <out>/m<m>/n<n>/<model-tag>/.lock-shard<i>of<N>            the run writing that shard (grid/lock.py)

A unit's .json (its record) is written last, after its .parquet, and marks it finished; the two
tables are rebuilt from the finished units, so a killed run loses at most the unit in flight.

One package for the layout, in four modules, each name defined once and read here as `results.<name>`:
`paths` (where each file lives, the atomic writes), `units` (a run's finished units and the tables rebuilt
from them), `outcomes` (what a unit's models did to test) and `tables` (every result read back, checked).
"""

from harness.results import outcomes, paths, tables, units
from harness.results.outcomes import (
    FLIPS,
    ONE_ANSWER,
    answer_id,
    collapsed,
    collapsed_classes,
    flips,
    predicted,
    predictions,
    test_majority,
)
from harness.results.paths import (
    CALIBRATION,
    COLUMNS,
    LAYOUT,
    NOT_ADAPTED,
    ONE_CLASS,
    OPTIONAL,
    PROVENANCE,
    TEST_MAJORITY,
    UNIT_LAYOUT,
    UNITS,
    adapter_path,
    atomic_write,
    calibration_path,
    file_problem,
    folder_problem,
    lock_path,
    manifest_path,
    manifest_paths,
    manifests,
    model_dir,
    model_manifests,
    new_log_path,
    null_model_path,
    report_path,
    screen_path,
    screens,
    shard_locks,
    task_dir,
    unit_paths,
    write_json,
)
from harness.results.tables import (
    calibration,
    collect,
    measured,
    model_dirs,
    probabilities,
    read_accuracies,
    unit_classes,
)
from harness.results.units import (
    any_unit,
    exposure_tests,
    finished,
    is_done,
    null_records,
    read_unit,
    rebuild,
    remove_unit,
    stale_tables,
    task_dirs,
    unit_records,
    write_unit,
)

__all__ = [
    "outcomes",
    "paths",
    "tables",
    "units",
    "COLUMNS",
    "OPTIONAL",
    "LAYOUT",
    "UNITS",
    "UNIT_LAYOUT",
    "PROVENANCE",
    "CALIBRATION",
    "NOT_ADAPTED",
    "ONE_CLASS",
    "TEST_MAJORITY",
    "test_majority",
    "model_dir",
    "task_dir",
    "screen_path",
    "screens",
    "manifest_path",
    "manifest_paths",
    "manifests",
    "model_manifests",
    "adapter_path",
    "report_path",
    "calibration_path",
    "lock_path",
    "shard_locks",
    "new_log_path",
    "folder_problem",
    "atomic_write",
    "file_problem",
    "write_json",
    "unit_paths",
    "null_model_path",
    "is_done",
    "read_unit",
    "unit_records",
    "null_records",
    "task_dirs",
    "any_unit",
    "finished",
    "stale_tables",
    "remove_unit",
    "write_unit",
    "rebuild",
    "exposure_tests",
    "FLIPS",
    "flips",
    "ONE_ANSWER",
    "answer_id",
    "collapsed",
    "collapsed_classes",
    "predicted",
    "predictions",
    "read_accuracies",
    "collect",
    "unit_classes",
    "measured",
    "probabilities",
    "model_dirs",
    "calibration",
]
