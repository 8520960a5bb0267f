"""Run record -> findings, ladder and verdict: everything a renderer needs, computed once."""

from __future__ import annotations

from dataclasses import dataclass

from gputriage.findings import Finding, Severity
from gputriage.ladder import RungView, Verdict, build_ladder, build_verdict
from gputriage.merge import evaluate_job
from gputriage.record import Run


@dataclass
class Diagnosis:
    run: Run
    findings: list[Finding]
    ladder: list[RungView]
    verdict: Verdict

    def worst_at_least(self, threshold: Severity) -> bool:
        """True when a finding at `threshold` or more severe exists (drives --fail-on)."""
        return any(f.severity.weight <= threshold.weight for f in self.findings)


def diagnose(run: Run) -> Diagnosis:
    findings = evaluate_job(run)  # per rank, tagged with `rank`, for a merged distributed job
    return Diagnosis(run, findings, build_ladder(run, findings), build_verdict(run, findings))
