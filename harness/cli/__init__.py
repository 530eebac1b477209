"""The `tapt-bench` command line: parsing and printing only, one module per command group; each command
parses its flags (generated from its settings dataclasses), calls the front door (harness.study.front_door)
and prints what it returns."""
