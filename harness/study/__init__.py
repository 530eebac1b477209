"""What works on whole studies, above the grid and the statistics: the exposure test's calibration and
its null models, the screen of a plan's tasks, the `--until-mde` rounds and the pilot that sizes a
confirmatory plan."""
