"""The summary: per task and pooled effects, their paired tests and intervals, the families BH corrects,
the verdict, the planted control, confirmation and what methods recorded."""
