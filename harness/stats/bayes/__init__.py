"""The Bayesian model (the study's hierarchical model) as the math, its sampling, its checks, the
meta-analysis, the PCA simulation and the figures of its fits."""
