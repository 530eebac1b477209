"""The grid's flows, one file each, each a `harness.grid.flow.Flow` named in `flow.NAMES`."""
