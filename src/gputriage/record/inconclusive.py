"""A rung's reason for "not measured" when the evidence is there but too thin to judge (a trace of one step).

A section returns it from `unmeasured_rungs()` like any reason; `record/coverage.py` marks that rung inconclusive, and
the verdict says "inconclusive" with the next command to run instead of "healthy" on the other rungs: a rung that was
looked at and could not be judged is news, not a gap in what the command measures.
"""

from __future__ import annotations


class Inconclusive(str):
    """A reason (a plain str to every reader) that also says: measured, but too thin to judge."""

    __slots__ = ()
