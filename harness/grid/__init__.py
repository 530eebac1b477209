"""The experiment grid (internal: a study runs through the front door, `harness.run`): a config, its
(task, subsample) units, and running them locally, in worker processes or on Ray, into the results layout.
Its inside is in layers: `grid_settings` <- `unit` <- `configuration` <- `execution` (pyproject.toml's
contracts)."""
