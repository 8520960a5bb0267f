"""The five-rung ladder view, derived from the Run record and its findings."""

from __future__ import annotations

from collections import Counter

import msgspec

from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.record.coverage import rung_coverage
from gputriage.rules.env_facts import RungGap, rung_one_gap

RUNG_QUESTIONS = {
    1: "Does this PyTorch build support CUDA, and can it reach the GPU?",
    2: "Is the data moved to the GPU?",
    3: "Is the model on the GPU?",
    4: "Does the computation really run on the GPU?",
    5: "How busy is the GPU, and what is it waiting for?",
}


class RungView(msgspec.Struct):
    rung: int
    question: str
    status: str  # pass | warn | fail | skipped ("not measured")
    finding_codes: list[str] = msgspec.field(default_factory=list)
    # skipped: why the rung was not measured ("no model ran a forward before the script crashed at step 0 (...)")
    reason: str | None = None
    note_codes: list[str] = msgspec.field(
        default_factory=list
    )  # the info findings among finding_codes: notes, not status
    # skipped because what was measured is too thin to judge (record/inconclusive.py), not because nothing was
    inconclusive: bool = False

    @property
    def mark(self) -> str:
        """The key of the mark a view draws: the status, or "inconclusive" for a rung too thin to judge."""
        return "inconclusive" if self.inconclusive else self.status

    @property
    def status_text(self) -> str:
        """The status in words: pass, warn, fail, "inconclusive" or "not measured" (JSON keeps "skipped" for both,
        with the reason, docs/contract.md)."""
        if self.status == "skipped":
            return "inconclusive" if self.inconclusive else "not measured"
        return self.status

    @property
    def decisive_codes(self) -> list[str]:
        return [c for c in self.finding_codes if c not in self.note_codes]

    @property
    def shown_decisive(self) -> list[str]:
        return once_each(self.decisive_codes)

    @property
    def shown_notes(self) -> list[str]:
        return once_each(self.note_codes)


def once_each(codes: list[str]) -> list[str]:
    """Each code once, in order, with how many findings carry it where several do ("pageable-memcpy" and a times
    sign and 2: one per rank); a list of the same code twice read as a mistake."""
    counts = Counter(codes)
    return [code if counts[code] == 1 else f"{code} ×{counts[code]}" for code in dict.fromkeys(codes)]


def build_ladder(run: Run, findings: list[Finding]) -> list[RungView]:
    """Each rung's status: fail / warn from its critical / warning findings; otherwise pass only when the rung was
    measured (record/coverage.py), else skipped with the reason. Info findings are notes: they never decide."""
    coverage = rung_coverage(run)
    gap = rung_one_unjudged(run, findings)
    views = []
    for rung, question in RUNG_QUESTIONS.items():
        mine = [f for f in findings if f.rung == rung]
        severities = {f.severity for f in mine}
        reason = None
        if Severity.CRITICAL in severities:
            status = "fail"
        elif Severity.WARNING in severities:
            status = "warn"
        elif coverage[rung].measured:
            status = "pass"
        else:
            status, reason = "skipped", coverage[rung].reason
        if rung == 1 and gap is not None and status == "pass":
            status, reason = "skipped", gap.reason()  # a pasted report that lacks the facts rung 1 needs
        notes = [f.code for f in mine if f.severity is Severity.INFO]
        thin = status == "skipped" and coverage[rung].inconclusive
        views.append(RungView(rung, question, status, [f.code for f in mine], reason, notes, thin))
    return views


def rung_one_unjudged(run: Run, findings: list[Finding]) -> RungGap | None:
    """Rung 1 is "not measured" when no rung-1 cause was found and the facts it needs are missing (a pasted report
    that does not say the build's CUDA, the GPU, or whether torch reaches it): never "pass" on a guess."""
    if any(f.rung == 1 and f.severity is not Severity.INFO for f in findings):
        return None
    return rung_one_gap(run)
