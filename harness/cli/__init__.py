"""The `tapt-bench` command line: parsing and printing only, one module per command group; every
command's flags are generated from its settings dataclass."""
