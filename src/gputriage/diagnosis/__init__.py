"""Run record -> findings, ladder and verdict: everything a renderer needs, computed once.

The diagnosis sits between the pure rules and the renderers:
- `job.py` evaluates the rules on a run, or on each rank of a merged torchrun job, and collapses repeats;
- `passes.py` relates findings to each other (a lower rung explains an idle GPU; a straggler's own finding explains
  why it is late), so that no rule ever has to call the registry again;
- `ladder.py` and `verdict.py` derive the five rungs and the one-line verdict from the findings and the record.
"""

from __future__ import annotations

import msgspec

from gputriage.diagnosis.job import evaluate_job
from gputriage.diagnosis.ladder import RungView, build_ladder
from gputriage.diagnosis.verdict import Verdict, build_verdict
from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.record.gpu import GpuSection
from gputriage.rules.gpu import device_verdict

__all__ = ["Diagnosis", "RungView", "Verdict", "diagnose"]


class Diagnosis(msgspec.Struct):
    run: Run
    findings: list[Finding]
    ladder: list[RungView]
    verdict: Verdict
    # One line per GPU the run sampled, by NVML index: "idle while python train.py (pid 42) holds 12.0 GiB".
    device_verdicts: dict[int, str] = msgspec.field(default_factory=dict)

    def worst_at_least(self, threshold: Severity) -> bool:
        """True when a finding at `threshold` or more severe exists (drives --fail-on)."""
        return any(f.severity.weight <= threshold.weight for f in self.findings)


def diagnose(run: Run) -> Diagnosis:
    findings = evaluate_job(run)  # per rank, tagged with `rank`, for a merged distributed job
    return Diagnosis(
        run,
        findings,
        build_ladder(run, findings),
        build_verdict(run, findings),
        gpu_device_verdicts(run.gpu),
    )


def gpu_device_verdicts(section: GpuSection | None, recent_s: float | None = None) -> dict[int, str]:
    """Each sampled GPU's one-line state; `recent_s` judges on the last seconds only (the live view)."""
    if section is None:
        return {}
    return {track.index: device_verdict(track, recent_s) for track in section.devices}
