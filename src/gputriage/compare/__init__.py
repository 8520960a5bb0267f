"""Did the fix work? `compare(before, after)` judges two diagnoses; report/compare_*.py render the result."""

from gputriage.compare.model import COMPARE_SCHEMA, Comparison, compare

__all__ = ["COMPARE_SCHEMA", "Comparison", "compare"]
