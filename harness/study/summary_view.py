"""A results folder's summary as the front door returns it: the tables (stats/summary/summary.py) with
what the summary prints beside them, as text or as one JSON-ready mapping."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Summary:
    """What `summarize` read of a folder. `tables`: the summary's mapping (its configs, tasks, control and
    verdicts, as `tapt-bench summarize --json` prints them); `text()`: what `tapt-bench summarize` prints;
    `to_dict()`: the tables with the exposure test, what each method recorded and the collapsed models."""

    folder: Path
    tables: dict
    models: tuple[tuple[int, int, str], ...] | None = None  # a run's own models, read together

    def __getitem__(self, key: str):
        return self.tables[key]

    def text(self) -> str:
        """What `tapt-bench summarize` prints, each line ended: the tables, then per model folder its
        changed predictions, collapsed models, what each method recorded and the exposure test."""
        from harness.results import model_dir
        from harness.stats.presentation.summary_text import format_tables

        models = self.models or ()
        folders = [model_dir(self.folder, m, n, t) for m, n, t in models] if models else [self.folder]
        return format_tables(self.tables) + "\n" + "".join(details(f, self.tables) for f in folders)

    def to_dict(self) -> dict:
        """The tables, with `exposure`, `methods` and `one_class` where the folder has them (a value a
        method or task did not record is None)."""
        from harness.results import exposure_tests
        from harness.stats.summary.diagnostics import method_records
        from harness.stats.summary.exposure_summary import exposure_shares
        from harness.stats.summary.summary import one_class

        shares = exposure_shares(exposure_tests(self.folder))
        records, collapsed = method_records(self.folder), one_class(self.folder)
        extra = {"exposure": shares} if shares else {}
        if not records.empty:
            extra["methods"] = records.astype(object).where(records.notna(), None).to_dict("records")
        if not collapsed.empty:
            extra["one_class"] = collapsed.astype(object).where(collapsed.notna(), None).to_dict("records")
        return self.tables | extra


def details(root: Path, tables: dict) -> str:
    """A folder's changed predictions, collapsed models, what each method recorded and the exposure test,
    each part followed by a blank line."""
    from harness.results import exposure_tests
    from harness.stats.presentation.summary_text import format_changes, format_one_class
    from harness.stats.summary.diagnostics import format_records, method_records
    from harness.stats.summary.exposure_summary import exposure_shares, format_exposure
    from harness.stats.summary.summary import one_class, prediction_changes

    changes = prediction_changes(root)
    parts = [
        "" if changes.empty else format_changes(changes),
        format_one_class(one_class(root)),
        format_records(method_records(root)),
        format_exposure(exposure_shares(exposure_tests(root)), tables),
    ]
    return "".join(part + "\n\n" for part in parts if part)
