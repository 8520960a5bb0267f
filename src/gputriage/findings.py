"""Finding: the unit that rules produce and renderers show, plus the "most likely root cause first" order."""

from __future__ import annotations

from enum import Enum
from typing import Any

import msgspec


class Severity(str, Enum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"

    @property
    def weight(self) -> int:
        """Lower sorts first: critical before warning before info."""
        return _SEVERITY_ORDER[self]


_SEVERITY_ORDER = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}

# Evidence values are numbers first (the contract says "numbers that prove it"), with strings and small lists for
# names: devices, module names, file:line.
Evidence = dict[str, Any]


class Finding(msgspec.Struct):
    """One diagnosed cause. `code` is stable (docs/contract.md catalogue); never rename one."""

    code: str
    rung: int
    severity: Severity
    title: str
    evidence: Evidence = msgspec.field(default_factory=dict)
    fix: str = ""
    where: str | None = None
    rank: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "rung": self.rung,
            "severity": self.severity.value,
            "title": self.title,
            "evidence": self.evidence,
            "fix": self.fix,
            "where": self.where,
            "rank": self.rank,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Finding:
        return cls(
            code=doc["code"],
            rung=int(doc["rung"]),
            severity=Severity(doc["severity"]),
            title=doc["title"],
            evidence=dict(doc.get("evidence") or {}),
            fix=doc.get("fix") or "",
            where=doc.get("where"),
            rank=doc.get("rank"),
        )


def root_cause_order(findings: list[Finding]) -> list[Finding]:
    """Most likely root cause first: severity, then the lower rung (it explains the rungs above it).

    The sort is stable, so within one severity and rung the registry's order (the order rules were written to
    reflect causality) decides.
    """
    return sorted(findings, key=lambda f: (f.severity.weight, f.rung))
