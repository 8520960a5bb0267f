"""The rule registry: pure functions Run -> [Finding], evaluated in a fixed, causal order."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gputriage.findings import Finding, root_cause_order
from gputriage.record import Run

Rule = Callable[[Run], Iterable[Finding]]

_RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    """Register a rule. Registration order is the tie-break within one severity and rung."""
    _RULES.append(fn)
    return fn


def registered() -> list[Rule]:
    return list(_RULES)


def evaluate(run: Run, rules: Iterable[Rule] | None = None) -> list[Finding]:
    """Run every rule on the record and order the findings, most likely root cause first."""
    found: list[Finding] = []
    for fn in registered() if rules is None else rules:
        found.extend(fn(run))
    return root_cause_order(found)
