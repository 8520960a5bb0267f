"""The five-rung ladder view, and the one-line verdict, derived from the Run record and its findings."""

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


@dataclass
class Verdict:
    status: str  # idle | underused | healthy | unknown
    root_cause: str | None
    summary: str
    # "preflight on a stand-in device" when the job ran on a simulated GPU (run --preflight); None on a real device
    label: str | None = None
    # with a label: what that kind of run can and cannot judge, in one or two sentences
    scope: str | None = None


def measured_rungs(run: Run) -> set[int]:
    """Which rungs this record has evidence for; the others are "skipped", not "pass"."""
    rungs: set[int] = set()
    if run.environment is not None:
        rungs.add(1)
    if run.placement is not None:
        rungs.update({2, 3})
    if run.compute is not None:
        rungs.add(4)
    if run.steps is not None or run.gpu is not None:
        rungs.add(5)
    if run.trace is not None and run.trace.ranks:
        rungs.update({4, 5})
    return rungs


def build_ladder(run: Run, findings: list[Finding]) -> list[RungView]:
    measured = measured_rungs(run)
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


def build_verdict(run: Run, findings: list[Finding]) -> Verdict:
    """`root_cause` is findings[0].code when it is critical or a warning (DESIGN.md contract); a preflight's verdict
    carries its label and scope."""
    verdict = _verdict(run, findings)
    stand_in = run.stand_in
    if stand_in is not None and stand_in.preflight:
        verdict.label = stand_in.label
        verdict.scope = preflight_scope(run)
    return verdict


def preflight_scope(run: Run) -> str:
    """What a preflight judged, what it cannot, and how the job ended on the stand-in."""
    stand_in = run.stand_in
    assert stand_in is not None
    sentences = [f"{stand_in.judges}; {stand_in.cannot_judge}."]
    backing = "computed on the CPU" if stand_in.backing == "cpu" else "shapes only (meta), reads were placeholders"
    ran = f"CUDA was simulated ({backing})"
    if stand_in.compiled_eagerly:
        ran += "; torch.compile ran eagerly"
    if stand_in.stopped_after_steps is not None:
        ran += f"; the preflight ended the job after {stand_in.stopped_after_steps} steps"
    sentences.append(ran + ".")
    return " ".join(s[0].upper() + s[1:] for s in sentences)


def _verdict(run: Run, findings: list[Finding]) -> Verdict:
    top = findings[0] if findings else None
    if top is not None and top.severity in (Severity.CRITICAL, Severity.WARNING):
        # A critical finding below rung 5 means the GPU is not doing the work at all; rung-5 criticals
        # (starvation, ranks sharing a GPU) and warnings mean it works, but not enough.
        idle = top.severity is Severity.CRITICAL and top.rung < 5
        status = "idle" if idle else "underused"
        return Verdict(status, top.code, f"{top.title}.")
    if not measured_rungs(run):
        return Verdict("unknown", None, "Nothing was measured, so there is no verdict." + _ending(run))
    skipped = sorted(set(RUNG_QUESTIONS) - measured_rungs(run))
    tail = f" (rungs {', '.join(map(str, skipped))} were not measured)" if skipped else ""
    return Verdict("healthy", None, f"No problem found on the measured rungs{tail}." + _ending(run))


def _ending(run: Run) -> str:
    """How the script ended, when that bounds what the verdict can say (a crash no rule blamed, a signal)."""
    proc = run.process
    if proc is None:
        return ""
    if proc.signal:
        return f" The run was stopped by {proc.signal}: this covers what was seen until then."
    if proc.exception_type and proc.exception_type != "SystemExit":
        where = f" at {proc.crash_where}" if proc.crash_where else ""
        return (
            f" The script crashed with {proc.exception_type}{where} (exit code {proc.exit_code}), "
            "which is not a device-placement problem: see its traceback."
        )
    return ""
