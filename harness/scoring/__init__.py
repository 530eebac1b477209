"""Scoring a model on a subsample's test split: zero-shot through lm-eval, or a fine-tuned classifier head."""
