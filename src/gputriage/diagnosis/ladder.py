"""The five-rung ladder view, derived from the Run record and its findings."""

from __future__ import annotations

from dataclasses import dataclass, field

from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.rules.env_facts import RungGap, rung_one_gap

RUNG_QUESTIONS = {
    1: "Does this PyTorch build support CUDA, and can it reach the GPU?",
    2: "Is the data moved to the GPU?",
    3: "Is the model on the GPU?",
    4: "Does the computation really run on the GPU?",
    5: "How busy is the GPU, and what is it waiting for?",
}


@dataclass
class RungView:
    rung: int
    question: str
    status: str  # pass | warn | fail | skipped
    finding_codes: list[str] = field(default_factory=list)
    reason: str | None = None  # why a skipped rung was not measured


def build_ladder(run: Run, findings: list[Finding]) -> list[RungView]:
    measured = run.measured_rungs()
    gap = rung_one_unjudged(run, findings)
    views = []
    for rung, question in RUNG_QUESTIONS.items():
        mine = [f for f in findings if f.rung == rung]
        severities = {f.severity for f in mine}
        if Severity.CRITICAL in severities:
            status = "fail"
        elif Severity.WARNING in severities:
            status = "warn"
        elif rung in measured or mine:
            status = "pass"
        else:
            status = "skipped"
        reason = None
        if rung == 1 and gap is not None:
            status, reason = "skipped", gap.reason()
        elif status == "skipped":
            reason = "not measured by this command"
        views.append(RungView(rung, question, status, [f.code for f in mine], reason))
    return views


def rung_one_unjudged(run: Run, findings: list[Finding]) -> RungGap | None:
    """Rung 1 is "not measured" when no rung-1 cause was found and the facts it needs are missing (a pasted report
    that does not say the build's CUDA, the GPU, or whether torch reaches it): never "pass" on a guess."""
    if any(f.rung == 1 and f.severity is not Severity.INFO for f in findings):
        return None
    return rung_one_gap(run)
