"""Task-adaptive pretraining: prompt adapters (zero-shot flow) and MLM/CLM on raw texts (classifier flow)."""
