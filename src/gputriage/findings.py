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


# Evidence that says how much of the step (or the window) a finding's cause keeps the GPU idle or the host busy.
EXPLAINED_PCT_KEYS = (
    "idle_after_sync_pct",
    "idle_in_short_gaps_pct_of_window",
    "gpu_idle_during_pct",
    "dataloader_pct_of_step",
    "dataloader_idle_pct_of_window",
    "pageable_h2d_pct_of_window",
    "data_wait_pct_of_step",
    "cpu_op_pct_of_step",
    "sync_pct_of_step",
    "eval_wait_pct_of_steps",
)
# A higher rung's finding leads a lower one of the same severity when it explains at least this many times as much.
LEADS_BY_FACTOR = 1.5


def explained_pct(f: Finding) -> float | None:
    """The largest share of the step (or window) the finding's evidence says its cause accounts for; None: unsaid."""
    values = [float(v) for k in EXPLAINED_PCT_KEYS if isinstance(v := f.evidence.get(k), (int, float))]
    return max(values) if values else None


def root_cause_order(findings: list[Finding]) -> list[Finding]:
    """Most likely root cause first: severity, then the lower rung (it explains the rungs above it).

    The sort is stable, so within one severity and rung the registry's order (the order rules were written to
    reflect causality) decides. One exception leads: a finding that explains at least LEADS_BY_FACTOR times as much of
    the step as every finding of its severity before it (each saying how much): a few pageable copies worth 3.5% of
    the window did not explain a DataLoader wait of 30% of each step, and were its root cause (a trial).
    """
    ordered = sorted(findings, key=lambda f: (f.severity.weight, f.rung))
    if not ordered:
        return ordered
    group = [f for f in ordered if f.severity is ordered[0].severity]
    shares = [explained_pct(f) for f in group]
    known = [s if s is not None else -1.0 for s in shares]
    best = known.index(max(known))
    top, before = known[best], shares[:best]
    if best and top >= 0 and all(s is not None and s * LEADS_BY_FACTOR <= top for s in before):
        ordered.remove(group[best])
        ordered.insert(0, group[best])
    return ordered
