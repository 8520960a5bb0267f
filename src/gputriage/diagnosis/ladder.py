"""The five-rung ladder view, derived from the Run record and its findings."""

from __future__ import annotations

from dataclasses import dataclass, field

from gputriage.findings import Finding, Severity
from gputriage.record import Run

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


def build_ladder(run: Run, findings: list[Finding]) -> list[RungView]:
    measured = run.measured_rungs()
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
        views.append(RungView(rung, question, status, [f.code for f in mine]))
    return views
