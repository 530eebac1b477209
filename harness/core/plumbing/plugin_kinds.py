"""The five kinds of plug-in, one row each. Each kind's Registry (plumbing/plugins.py), the registration
verb (`harness.api.register`), the entry points (each group's name) and the docs' table read these rows: a
new kind is one row here and its Registry.

Every kind is named one way: a value, `package.module:NAME` or `path/to/file.py:NAME`, given in a config or
on the command line, registered in Python (`harness.api.register(value)`), or installed as an entry point of
the kind's group whose value names it (`mine = my_package.my_module:NAME`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    name: str  # as errors name it: "method"
    type: str  # the value's class, `module:Class`
    registry: str  # where its Registry is, `module:NAME`
    group: str  # its entry points' group
    example: str  # how a user names one
    what: str  # what one adds (the docs' row)


KINDS = (
    Kind(
        "method",
        "tapt.methods.contract:Method",
        "tapt.methods.registry:METHODS",
        "tapt_bench.methods",
        "path/to/my_method.py:METHOD",
        "how a model adapts on one split's documents (the config's `method`)",
    ),
    Kind(
        "flow",
        "harness.grid.unit.flow:Flow",
        "harness.grid.unit.flow:FLOWS",
        "tapt_bench.flows",
        "path/to/my_flow.py:FLOW",
        "how a unit is computed: the base loaded, each condition adapted and scored (the config's `flow`)",
    ),
    Kind(
        "detector",
        "contamination.detectors:Detector",
        "contamination.detectors:DETECTORS",
        "tapt_bench.detectors",
        "path/to/my_detectors.py:DETECTOR",
        "a contamination check calibrated beside the built-ins (`contamination calibrate --detectors`)",
    ),
    Kind(
        "statistic",
        "harness.stats.summary.statistics:Statistic",
        "harness.stats.summary.statistics:STATISTICS",
        "tapt_bench.statistics",
        "path/to/my_stats.py:STATISTIC",
        "a column of the summary's tables (`summarize --statistics`)",
    ),
    Kind(
        "score",
        "contamination.doc_scores:Score",
        "contamination.detectors:SCORES",
        "tapt_bench.scores",
        "path/to/my_score.py:SCORE",
        "a per-document score the exposure test reads, with its detector (the config's `scores`)",
    ),
)

BY_NAME = {k.name: k for k in KINDS}


def table() -> str:
    """The kinds as the docs' Markdown table."""
    rows = [
        f"| {k.name} | `{k.type.replace(':', '.')}` | `{k.group}` | `{k.example}` | {k.what} |" for k in KINDS
    ]
    head = ["| kind | its value | entry-point group | named as | what it adds |", "|---|---|---|---|---|"]
    return "\n".join([*head, *rows])
