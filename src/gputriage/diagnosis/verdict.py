"""The one-line verdict: idle, underused, healthy on what was measured (named), inconclusive (rung 1 lacks the facts
it needs, and the next command to paste is named; or the script crashed before the ladder was measured), or
unknown."""

from __future__ import annotations

import msgspec

from gputriage.diagnosis.ladder import rung_one_unjudged
from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.record.coverage import JOB_COMMANDS, RUNG_TOPICS, RungCoverage, rung_coverage
from gputriage.record.device import is_preflight
from gputriage.record.stand_in import STAND_IN_LIMIT
from gputriage.rules.env_facts import not_rung_one_errors
from gputriage.stdlib import shlex
from gputriage.wording import counted, numbered


class Verdict(msgspec.Struct):
    status: str  # idle | underused | healthy | inconclusive | unknown
    root_cause: str | None
    summary: str
    # "preflight on a stand-in device" when the job ran on a simulated GPU (run --preflight); None on a real device
    label: str | None = None
    # with a label: what that kind of run can and cannot judge, in one or two sentences
    scope: str | None = None


def build_verdict(run: Run, findings: list[Finding]) -> Verdict:
    """`root_cause` is findings[0].code when it is critical or a warning (docs/contract.md); a preflight's verdict
    carries its label and scope."""
    verdict = _verdict(run, findings)
    if is_preflight(run) and run.stand_in is not None:
        verdict.label = run.stand_in.label
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
        # what came after (evaluation, a test loop, generation, saving) never ran on the stand-in, so a mistake there
        # is not judged: say so, with the option that reaches it
        unit = run.steps.unit_note() if run.steps is not None else None
        ran += (
            f"; the preflight ended the job after {counted(stand_in.stopped_after_steps, 'step')}"
            + (f" ({unit})" if unit is not None else "")
            + ", so the code after "
            "them (the rest of training, evaluation, saving) did not run: `--steps N`, N above the job's own step "
            "count, runs it to its end"
        )
    sentences.append(ran + ".")
    return " ".join(s[0].upper() + s[1:] for s in sentences)


def _verdict(run: Run, findings: list[Finding]) -> Verdict:
    top = findings[0] if findings else None
    if top is not None and top.severity in (Severity.CRITICAL, Severity.WARNING):
        # A critical finding below rung 5 means the GPU is not doing the work at all; rung-5 criticals
        # (starvation, ranks sharing a GPU) and warnings mean it works, but not enough.
        idle = top.severity is Severity.CRITICAL and top.rung < 5
        status = "idle" if idle else "underused"
        # a crash no finding explains still bounds what was seen: said after the cause (a job that died at step 30
        # with an evaluation loader's finding lost its crash sentence, a trial)
        crashed = "" if _crash_explained(findings) else _ending(run)
        return Verdict(status, top.code, f"{top.title}.{crashed}")
    notes = "".join(f" {note}" for note in not_rung_one_errors(run))
    gap = rung_one_unjudged(run, findings)
    if gap is not None:
        summary = f"Rung 1 could not be judged: {gap.reason().removeprefix('not measured: ')}. {gap.next_step()}"
        return Verdict("inconclusive", None, summary + notes + _ending(run))
    coverage = rung_coverage(run)
    measured = [r for r, c in coverage.items() if c.measured]
    thin = [c for c in coverage.values() if c.inconclusive]
    if thin:
        return Verdict("inconclusive", None, _thin(thin, measured, findings) + notes + _ending(run))
    if not measured or (run.command in JOB_COMMANDS and measured == [1]):
        return Verdict("unknown", None, _nothing_measured(run, coverage) + notes)
    topics = ", ".join(RUNG_TOPICS[r] for r in measured)
    summary = f"No problem found in what was measured: {topics} ({numbered('rung', measured)})."
    skipped = [c for c in coverage.values() if not c.measured]
    if skipped:
        summary += " Not measured: " + _not_measured(skipped) + "."
    rung_one = next((f" {f.title}." for f in findings if f.rung == 1), "")  # info: why rung 1 is fine as it is
    if _crash_cut_short(run, skipped):
        # A job that died before the rest of the ladder could be measured is not "healthy": its crash comes first.
        return Verdict("inconclusive", None, summary + rung_one + notes + _ending(run) + _rerun(run))
    return Verdict("healthy", None, summary + rung_one + notes + _ending(run))


def _thin(thin: list[RungCoverage], measured: list[int], findings: list[Finding]) -> str:
    """A rung looked at but too thin to judge: why, what it shows all the same (its leading note), and what else was
    measured without a problem."""
    parts = []
    for c in thin:
        parts.append(f"Rung {c.rung} ({RUNG_TOPICS[c.rung]}) is inconclusive, {c.reason}.")
        lead = next((f for f in findings if f.rung == c.rung), None)
        if lead is not None:
            parts.append(f"What it shows: {lead.title}.")
    if measured:
        topics = ", ".join(RUNG_TOPICS[r] for r in measured)
        parts.append(f"No problem found in {topics} ({numbered('rung', measured)}).")
    return " ".join(parts)


def _crash_cut_short(run: Run, skipped: list[RungCoverage]) -> bool:
    """The script crashed (no rule blamed the crash) and a rung of the job was left unmeasured."""
    proc = run.process
    crashed = proc is not None and bool(proc.exception_type) and proc.exception_type != "SystemExit"
    return crashed and run.command in JOB_COMMANDS and any(c.rung > 1 for c in skipped)


def _rerun(run: Run) -> str:
    return " Fix that error, then run the same gputriage command again to measure the rest."


def _not_measured(skipped: list[RungCoverage]) -> str:
    """'rung 1, <why>; rungs 2, 3 and 4, <why>': rungs that share a reason say it once."""
    by_reason: dict[str, list[int]] = {}
    for c in skipped:
        by_reason.setdefault(c.reason or "not measured", []).append(c.rung)
    return "; ".join(f"{numbered('rung', rungs)}, {_for(reason, len(rungs))}" for reason, rungs in by_reason.items())


def _for(reason: str, rungs: int) -> str:
    # The reasons are written for one rung (coverage.py): "does not measure it" said of two rungs is "them".
    return reason.replace("does not measure it", "does not measure them") if rungs > 1 else reason


def _nothing_measured(run: Run, coverage: dict[int, RungCoverage]) -> str:
    if run.command not in JOB_COMMANDS:
        said = [c.reason for c in coverage.values() if c.said_by_record and c.reason]
        why = f": {said[-1]}." if said else "."  # the last rung's: the one the command came to measure
        return "No rung of the ladder was measured, so there is no verdict" + why + _ending(run)
    job = [c for c in coverage.values() if c.rung > 1 and c.reason]
    why = f" ({job[0].reason})" if job else ""
    return f"Nothing of the job was measured{why}, so there is no verdict." + _ending(run)


def _ending(run: Run) -> str:
    """How the script ended, when that bounds what the verdict can say (a crash no rule blamed, a signal)."""
    proc = run.process
    if proc is None:
        return ""
    if proc.signal:
        return f" The run was stopped by {proc.signal}: this covers what was seen until then."
    if proc.exception_type and proc.exception_type != "SystemExit":
        where = f" at {proc.crash_where}" if proc.crash_where else ""
        if (proc.exception_message or "").startswith(STAND_IN_LIMIT):
            # the stand-in's own limit, said as the job's error: not the script's fault, and not a verdict on it
            return (
                f" The preflight could not go on{where}: what the script does there cannot be simulated without a "
                "GPU (see the error); the script itself is not at fault."
            )
        if _no_cuda_here(run):
            # a script that calls .cuda() on a machine whose torch has no CUDA: its placement can still be checked here
            return (
                f" The script crashed with {proc.exception_type}{where} (exit code {proc.exit_code}): it asks for "
                "CUDA, and this torch has none. To check the job here, without a GPU: gputriage run --preflight "
                f"{shlex.join(run.argv) if run.argv else 'SCRIPT'} (a stand-in CUDA device)."
            )
        return (
            f" The script crashed with {proc.exception_type}{where} (exit code {proc.exit_code}), "
            "which is not a device-placement problem: see its traceback."
        )
    return ""


def _crash_explained(findings: list[Finding]) -> bool:
    """A finding names the crash (a device-mismatch error, data on the CPU that crashed a loss): its line is the
    crash's, and a sentence about the crash would repeat it."""
    return any(
        "crashed_with" in f.evidence or "crash_where" in f.evidence or f.code == "device-mismatch-error"
        for f in findings
    )


_NO_CUDA_MESSAGES = ("Torch not compiled with CUDA enabled", "Found no NVIDIA driver on your system")


def _no_cuda_here(run: Run) -> bool:
    """The job died asking for CUDA where there is none (a CPU build, no driver), in a plain run."""
    message = run.process.exception_message if run.process is not None else None
    return run.stand_in is None and any(m in (message or "") for m in _NO_CUDA_MESSAGES)
