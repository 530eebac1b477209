"""Contamination checks of a (TAPT-adapted) model: the two-sample exposure test against the extra split
(text and labels), and the sharded exchangeability test of Oren et al. (2024)."""
