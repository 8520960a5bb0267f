"""The rule registry: pure functions Run -> [Finding], evaluated in a fixed, causal order."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gputriage.findings import Finding, root_cause_order
from gputriage.record import Run

Rule = Callable[[Run], Iterable[Finding]]
# A pass over all findings of one record, after the rules: where one finding explains another (a lower rung explains
# an idle GPU), the pass relates them. Pure like the rules: (record, findings) in, findings out.
Pass = Callable[[Run, list[Finding]], list[Finding]]

_RULES: list[Rule] = []
_PASSES: list[Pass] = []


def rule(fn: Rule) -> Rule:
    """Register a rule. Registration order is the tie-break within one severity and rung."""
    _RULES.append(fn)
    return fn


def postpass(fn: Pass) -> Pass:
    """Register a pass that runs on the ordered findings of `evaluate`, in registration order."""
    _PASSES.append(fn)
    return fn


def registered() -> list[Rule]:
    return list(_RULES)


def evaluate(run: Run, rules: Iterable[Rule] | None = None) -> list[Finding]:
    """Run every rule on the record and order the findings, most likely root cause first."""
    found: list[Finding] = []
    for fn in registered() if rules is None else rules:
        found.extend(fn(run))
    found = root_cause_order(found)
    if rules is None:
        for relate in _PASSES:
            found = relate(run, found)
    return found
