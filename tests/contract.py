"""The JSON contract's fixed field lists (docs/contract.md), written out once for the tests, and the check of
findings against the finding catalogue.

Spelled out here rather than read from the code, so a renamed field fails a test instead of following silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gputriage.data.catalogue import BY_CODE, COMMON_EVIDENCE

# The `trace` section: one entry per rank with these fields (null where the trace cannot give one).
TRACE_RANK_FIELDS = (
    "rank",
    "device",
    "steps",
    "window_us",
    "busy_pct",
    "idle_pct",
    "compute_pct",
    "non_compute_pct",
    "idle_breakdown",
    "step_time_us",
    "busy_pct_of_steps",
    "dataloader_pct_of_step",
)
IDLE_BREAKDOWN_FIELDS = ("host_wait_pct", "kernel_wait_pct", "other_pct")

# The verdict (docs/contract.md).
VERDICT_FIELDS = ("status", "root_cause", "summary", "label", "scope")
VERDICT_STATUSES = ("idle", "underused", "healthy", "inconclusive", "unknown")
# Each `ladder` entry; `reason` says why a `skipped` rung was not measured, and is null for every other status.
LADDER_FIELDS = ("rung", "question", "status", "finding_codes", "reason")
LADDER_STATUSES = ("pass", "warn", "fail", "skipped")


def ladder_problems(ladder: list[dict[str, Any]]) -> list[str]:
    problems = []
    for entry in ladder:
        if tuple(entry) != LADDER_FIELDS:
            problems.append(f"rung {entry.get('rung')}: fields {tuple(entry)}, the contract says {LADDER_FIELDS}")
        if entry.get("status") not in LADDER_STATUSES:
            problems.append(f"rung {entry.get('rung')}: status {entry.get('status')!r}")
        if (entry.get("status") == "skipped") != bool(entry.get("reason")):
            problems.append(
                f"rung {entry.get('rung')}: status {entry.get('status')} with reason {entry.get('reason')!r}"
            )
    return problems


def catalogue_problems(findings: Iterable[dict[str, Any]]) -> list[str]:
    """Findings (in their JSON form) that the catalogue does not declare: an unknown code, another rung, a severity
    or an evidence field it does not list."""
    problems = []
    for f in findings:
        entry = BY_CODE.get(f["code"])
        if entry is None:
            problems.append(f"{f['code']}: not in the catalogue")
            continue
        if f["rung"] != entry.rung:
            problems.append(f"{f['code']}: rung {f['rung']}, the catalogue says {entry.rung}")
        if f["severity"] not in entry.severities:
            problems.append(f"{f['code']}: severity {f['severity']} is not among {entry.severities}")
        extra = set(f.get("evidence") or {}) - set(entry.evidence) - set(COMMON_EVIDENCE)
        if extra:
            problems.append(f"{f['code']}: evidence fields {sorted(extra)} are not in the catalogue")
    return problems
