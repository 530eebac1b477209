"""The statistics of a grid's results: the summary and its tests, the hierarchical Bayesian model,
its checks, the meta-analysis, the figures, and the PCA simulation."""
