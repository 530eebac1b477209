"""A config, read and checked, down to the plans of its runs: `plan.run_plans(config)` checks a config
and gives a `RunPlan` per cell and method (`plan.run_plan` gives one, of a config checked already). It
reads the unit's flows (harness.grid.unit) to check a config against the flow it names."""
