"""Which rungs a record measured, and for each other rung why not: the one answer the ladder and the verdict read.

A rung is measured when a section holds evidence for it (`measured_rungs()`), not merely when the section exists: a
placement section that saw no model did not measure rung 3. A rung is also left unjudged when its question does not
apply to the device the run is judged for: rungs 2-4 ask about an accelerator, which a run judged for the CPU does not
use; rung 1 asks whether torch reaches the GPU, which a job the user ran on cpu or meta (`run --expect-device`) does
not need.

Each rung that was not measured carries one reason, as a sentence a user can act on: what was missing, and how the
script ended when that is why ("no model ran a forward before the script crashed at step 0 (RuntimeError at
train.py:237)").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from gputriage.record.device import NOT_ACCELERATORS, device_type, is_preflight, judged_device
from gputriage.record.inconclusive import Inconclusive

if TYPE_CHECKING:
    from gputriage.record.run import Run

RUNGS = (1, 2, 3, 4, 5)
# What each rung measures, in a few words, for the verdict's "healthy on ...".
RUNG_TOPICS = {
    1: "the PyTorch build and the GPU",
    2: "where the data is",
    3: "where the model is",
    4: "where the ops run",
    5: "what the step waits for",
}
# The reason when no section said more (the command did not measure the rung at all).
_DEFAULT_REASONS = {
    1: "the environment was not probed",
    2: "the placement probe did not run",
    3: "the placement probe did not run",
    4: "the op census did not run",
    5: "no step timing and no GPU sampling",
}

# Which commands measure each rung: said when the command that made the record does not.
_MEASURED_BY = {
    1: "`gputriage env` or `run` do",
    2: "`gputriage run` does",
    3: "`gputriage run` does",
    4: "`gputriage run` does",
    5: "`gputriage run`, `trace` or `watch` do",
}
# Commands that watch the user's job: their verdict is about the job, and they measure every rung.
JOB_COMMANDS = ("run", "demo")


def _default_reason(run: Run, rung: int) -> str:
    if run.command and run.command not in JOB_COMMANDS:
        return f"`gputriage {run.command}` does not measure it ({_MEASURED_BY[rung]})"
    return _DEFAULT_REASONS[rung]


class RungCoverage(msgspec.Struct, frozen=True):
    rung: int
    measured: bool
    reason: str | None = None  # why not measured; None when measured
    # The reason comes from what a section holds (a trace in a form not read), not from what the command measures.
    said_by_record: bool = False
    # The section holds evidence for the rung, too thin to judge (record/inconclusive.py): the verdict is inconclusive.
    inconclusive: bool = False


def rung_coverage(run: Run) -> dict[int, RungCoverage]:
    """rung -> measured, or not measured with its reason."""
    measured: set[int] = set()
    reasons: dict[int, str] = {}
    for _, section in run.present_sections():
        measured |= section.measured_rungs()
        for rung, why in section.unmeasured_rungs().items():
            reasons.setdefault(rung, why)
    if run.command in JOB_COMMANDS and run.steps is None:
        reasons[5] = "no step completed"
    gpu_side = _gpu_side_unmeasured(run)
    if 5 in measured and gpu_side is not None:
        measured.discard(5)
        reasons[5] = gpu_side
    out = {}
    ending = _ending(run)
    for rung in RUNGS:
        unjudged = _not_judged(run, rung)
        if unjudged is not None:
            out[rung] = RungCoverage(rung, False, unjudged)
        elif rung in measured:
            out[rung] = RungCoverage(rung, True)
        else:
            said = rung in reasons
            why = reasons.get(rung, _default_reason(run, rung))
            out[rung] = RungCoverage(rung, False, why + ending, said, isinstance(why, Inconclusive))
    return out


def _gpu_side_unmeasured(run: Run) -> str | None:
    """Why rung 5's first half, how busy the GPU is, went unmeasured on a real job judged for an accelerator; None when
    it was measured or is not asked. The step's waits answer only the second half, so a "pass" on them alone would say
    the GPU was busy enough where no reading of it exists (a job that never reached its GPU, NVML missing, a
    preflight's stand-in). A trace or `watch` is judged by its own sections."""
    judged = judged_device(run)
    if run.command not in JOB_COMMANDS or judged is None or judged in NOT_ACCELERATORS:
        return None
    if run.stand_in is not None:
        # a preflight's host side alone: "✓ pass" read as "the GPU is busy enough" beside a scope saying GPU timing
        # was not judged (a trial)
        return (
            "how busy the GPU keeps is not measured on a stand-in (`gputriage run` on the GPU machine measures it); "
            "what the step waits for on the host was, with no finding"
        )
    for section in (run.gpu, run.trace):
        if section is not None and 5 in section.measured_rungs():
            return None
    why = run.gpu.unmeasured_rungs()[5] if run.gpu is not None else "the GPU was not sampled"
    return f"how busy the {judged} device is was not measured: {why}; what the step waits for was, with no finding"


def measured_rungs(run: Run) -> list[int]:
    return [c.rung for c in rung_coverage(run).values() if c.measured]


def _not_judged(run: Run, rung: int) -> str | None:
    """Why a rung's question does not apply to the device the run is judged for, or is outside what the command
    looks at (a preflight and the GPU machine); None when it does. How the job ended never explains these."""
    scope = run.stand_in.unmeasured_rungs().get(rung) if run.stand_in is not None else None
    if scope is not None:
        return scope
    if rung == 5 and preflight_skips_loader(run):
        return (
            "a preflight does not judge a DataLoader with workers: they share this machine's cores with the "
            "stand-in's compute (`gputriage run` on the GPU machine does)"
        )
    judged = judged_device(run)
    if judged == "cpu" and rung in (2, 3, 4):
        return "not judged: no accelerator is expected (the run is judged for cpu), so nothing has to move to one"
    job = run.command in ("run", "demo")  # for `env`, the environment is the subject: rung 1 is always judged
    if rung != 1 or not job or _torch_reaches_an_accelerator(run):
        return None
    return _rung1_not_judged(run, judged)


def _rung1_not_judged(run: Run, judged: str | None) -> str | None:
    """A job meant for no accelerator, or that found none with none asked for: rung 1's findings are notes."""
    chosen = device_type(run.expect_device)
    if chosen in NOT_ACCELERATORS:
        return (
            f"not judged: the run is meant for {chosen} (--expect-device), and this torch reaches no GPU "
            "(rung 1's findings are notes here)"
        )
    if chosen is None and judged in NOT_ACCELERATORS:
        # no device asked for, and none at the job's start: "can it reach the GPU?" cannot pass where there is none
        # (a trial read "✓ pass" beside the notes no-gpu-visible and cpu-only-build); the notes say what is missing
        return f"not judged: this torch reaches no GPU here (rung 1's findings are notes, the run is for {judged})"
    return None


def preflight_skips_loader(run: Run) -> bool:
    """A preflight's DataLoader with workers: its wait is not judged (rung 5's one question a preflight answers)."""
    loader = run.steps.loader if run.steps is not None else None
    return is_preflight(run) and loader is not None and (loader.num_workers or 0) > 0


def _torch_reaches_an_accelerator(run: Run) -> bool:
    env = run.environment
    if env is None:
        return False
    return bool(env.torch.is_available) or any(env.torch.other_accelerators.values())


def _ending(run: Run) -> str:
    """' before the script crashed at step 0 (RuntimeError at train.py:237)', when how it ended explains a gap."""
    proc = run.process
    if proc is None:
        return ""
    step = (run.steps.steps_total or len(run.steps.steps)) if run.steps is not None else 0
    if proc.signal:
        return f" before the script was stopped by {proc.signal} at step {step}"
    if proc.exception_type and proc.exception_type != "SystemExit":
        where = f" at {proc.crash_where}" if proc.crash_where else ""
        return f" before the script crashed at step {step} ({proc.exception_type}{where})"
    return ""
