"""tapt-bench: does adapting a model on a test set's unlabeled inputs inflate its test score, and did a
checkpoint see a test set? The public surface is this front door and `harness.api` (for plug-ins); every
other module is internal and may move.

    import harness
    ran = harness.run("demo", data_dir="../shared/data")      # as `tapt-bench run --config demo ...`
    print(harness.summarize(ran.out).text(), end="")            # as `tapt-bench summarize`
    harness.report(ran.out)                                     # as `tapt-bench report`

Also `harness.merge`, `harness.pilot` and `harness.calibrate` (harness/study/front_door.py)."""

FRONT_DOOR = ("run", "merge", "summarize", "report", "pilot", "calibrate")
RESULTS = ("Ran", "Report", "Pilot", "Calibration")  # what they return

__all__ = [*FRONT_DOOR, *RESULTS]


def __getattr__(name: str):  # loaded on first use: `import harness` alone imports no torch
    if name in __all__:
        from harness.study import front_door

        return getattr(front_door, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
