"""The experiment grid: a config, its (task, subsample) units, and running them locally, in worker
processes or on Ray, into the results layout."""
