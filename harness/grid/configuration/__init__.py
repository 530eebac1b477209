"""A config, read and checked, down to the plans of its runs: `plan.run_plans(config)` is the one way from
a grid config to what its units compute from. It reads the unit's flows (harness.grid.unit) to check a
config against the flow it names."""
