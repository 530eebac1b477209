"""The tasks and their data: task YAMLs, pools, seeded subsamples, their splits and prompts."""
