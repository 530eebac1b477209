"""The grid's built-in flows, one file each, each module with a module-level `FLOW` (grid/unit/flow.py)."""
