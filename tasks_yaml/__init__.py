"""The tapt_* task YAMLs for lm-eval, shipped as package data; `utils.py` is their data hook."""
