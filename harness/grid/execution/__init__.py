"""Where and how a run's units are computed: one by one, in worker processes or as Ray tasks; the run's
lock, its log, the merge of its tables, and the folder checks before anything is written."""
