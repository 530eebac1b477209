"""The `tapt-bench` command line: parsing and printing only, one module per command group; every
command's flags are generated from its settings dataclass. `harness.cli.rounds` moved to
`harness.study.rounds`; its old name answers for one release (harness.core.moved)."""

from harness.core.moved import keep_old_names

keep_old_names(__name__, {"rounds": "harness.study.rounds"})
