"""The design's constants: the conditions and effects, the seed streams, power and intervals, a study's
plan."""
