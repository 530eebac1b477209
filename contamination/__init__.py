"""The sharded exchangeability test of Oren et al. (2024) for contamination of a (TAPT-adapted) model."""
