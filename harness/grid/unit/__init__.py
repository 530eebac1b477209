"""One unit of the grid: its plan (`UnitPlan`), the flows that compute it (zero-shot, classifier, a
plug-in), the base model they share, the stream condition, and the record a unit writes."""
