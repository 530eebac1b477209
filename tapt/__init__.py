"""Task-adaptive pretraining: prompt adapters (zero-shot flow) and raw-text MLM/CLM (classifier flow)."""
