"""The model engine: loading a base (and its precision), weights and their fingerprints, log-likelihoods,
generation, training's shared parts, kept adapters and torch threads."""
