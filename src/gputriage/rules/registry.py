"""The rule registry: pure functions Run -> [Finding], evaluated in a fixed, causal order.

Two kinds of rule:
- `@rule`: reads one record (a run, or one rank of a job); the diagnosis runs it on each rank of a merged job;
- `@job_rule`: reads the merged view of all ranks (`run.ranks`), e.g. which rank the others wait for.
Registration order is the tie-break between findings of the same severity and rung: `rules/__init__.py` imports the
rule modules in causal order (a broken install explains everything above it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gputriage.findings import Finding, root_cause_order
from gputriage.record import Run

Rule = Callable[[Run], Iterable[Finding]]

_RULES: list[Rule] = []
_JOB_RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    """Register a rule on one record."""
    _RULES.append(fn)
    return fn


def job_rule(fn: Rule) -> Rule:
    """Register a rule on the merged view of a distributed job (it returns nothing on a single record)."""
    _JOB_RULES.append(fn)
    return fn


def registered() -> list[Rule]:
    return list(_RULES)


def job_rules() -> list[Rule]:
    return list(_JOB_RULES)


def evaluate(run: Run, rules: Iterable[Rule] | None = None) -> list[Finding]:
    """Run the rules (default: every per-record rule) on the record; findings most likely root cause first."""
    found: list[Finding] = []
    for fn in registered() if rules is None else rules:
        found.extend(fn(run))
    return root_cause_order(found)
