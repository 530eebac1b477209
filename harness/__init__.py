"""tapt-bench: does task-adaptive pretraining on test text inflate few-shot classification scores?"""
