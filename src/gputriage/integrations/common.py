"""What the framework callbacks share: one session over the training, the report files, and the key numbers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from gputriage.api import Session
from gputriage.collectors.session import DEFAULT_STEPS
from gputriage.diagnosis import Diagnosis
from gputriage.errors import InputError
from gputriage.findings import Finding, Severity
from gputriage.record.numbers import step_numbers
from gputriage.record.steps import steady_steps
from gputriage.report.output import OutputOptions, emit, write_files
from gputriage.stdlib import statistics

METRIC_PREFIX = "gputriage/"


class RecordedResults:
    """The results a framework callback exposes after training, read from its `TrainingRecorder`."""

    _recorder: TrainingRecorder

    @property
    def diagnosis(self) -> Diagnosis | None:
        """The last training's diagnosis (None before a training has ended)."""
        return self._recorder.diagnosis

    @property
    def findings(self) -> list[Finding]:
        return self.diagnosis.findings if self.diagnosis is not None else []


class TrainingRecorder:
    """A `gputriage.session()` opened at train-begin and closed at train-end, as a callback needs it."""

    def __init__(
        self,
        expect_device: str | None = None,
        steps: int | None = DEFAULT_STEPS,
        print_report: bool = True,
        stream: TextIO | None = None,
    ) -> None:
        self.expect_device = expect_device
        self.steps = steps
        self.print_report = print_report
        self.stream = stream
        self.session: Session | None = None
        self.diagnosis: Diagnosis | None = None

    @property
    def recording(self) -> bool:
        return self.session is not None and self.diagnosis is None

    def begin(self) -> None:
        """Start recording (again, for a second fit with the same callback)."""
        if self.recording:  # the last training died without an end hook (HF has none for exceptions): unhook it
            self.end("an interrupted training")
        self.diagnosis = None
        self.session = Session(self.expect_device, self.steps).start()

    def end(self, target: str, exc: BaseException | None = None) -> Diagnosis | None:
        """Stop recording and diagnose; None when nothing was recording (an exception before train-begin)."""
        if not self.recording:
            return None
        assert self.session is not None
        diag = self.session.stop(exc)
        if diag.run.process is not None:
            diag.run.process.target = target
        self.diagnosis = diag
        return diag

    def report(self, out_dir: Path | None) -> None:
        """The terminal report to stderr (the job's stdout is its own) and report.json and friends into out_dir.

        A full disk or an unwritable folder is one line on stderr: the training's own outcome must stand.
        """
        if self.diagnosis is None:
            return
        stream = self.stream if self.stream is not None else sys.stderr
        if self.print_report:
            emit(self.diagnosis, OutputOptions(terminal_stream=stream))
        if out_dir is None:
            return
        try:
            write_files(self.diagnosis, out_dir)
        except InputError as exc:
            print(f"gputriage: error: {exc}", file=stream)
            return
        print(f"gputriage: report written to {out_dir / 'report.html'} (and report.json)", file=stream)


def key_numbers(diag: Diagnosis) -> dict[str, float]:
    """The few numbers worth a line in an experiment tracker, named with units, under `gputriage/`."""
    run = diag.run
    numbers: dict[str, float] = {
        "findings_critical": sum(f.severity is Severity.CRITICAL for f in diag.findings),
        "findings_warning": sum(f.severity is Severity.WARNING for f in diag.findings),
    }
    step = step_numbers(run.steps.steps) if run.steps is not None else None
    if run.steps is not None and run.steps.steps:
        numbers["steps_observed"] = len(run.steps.steps)
    if step is not None and run.steps is not None:
        numbers["step_s"] = step.step_time_s
        # the steps the reports' numbers rest on ("39 steps": warm-up step 0 left out), beside steps_observed (40)
        numbers["steps_measured"] = step.window.count
        # Published before step_s existed, so kept (metric names are never renamed): the median of the same window.
        numbers["median_step_s"] = statistics.median(s.host_s() for s in steady_steps(run.steps.steps))
        numbers["data_wait_pct"] = step.part("data_wait").share_pct
    if run.gpu is not None:
        utils = [d.summary.util_mean_pct for d in run.gpu.devices if d.cuda_index is not None]
        known = [u for u in utils if u is not None]
        if known:
            numbers["gpu_util_mean_pct"] = statistics.fmean(known)
    return {METRIC_PREFIX + name: float(value) for name, value in numbers.items()}


def measured_verdicts(diag: Diagnosis) -> list[str]:
    """Two measured sentences in place of the frameworks' static guesses ("GPU available but not used", "few
    workers"): is the expected device doing the work, and does the step wait for the DataLoader."""
    return [_device_verdict(diag), _loader_verdict(diag)]


def _device_verdict(diag: Diagnosis) -> str:
    expected = diag.run.expect_device or "the accelerator"
    blocking = [f for f in diag.findings if f.rung <= 4 and f.severity is Severity.CRITICAL]
    if blocking:
        first = blocking[0]
        return f"device: expected {expected}, measured: {first.title} ({first.code})"
    # a rung "not judged" (a CPU run has no accelerator to move to) is not one that lacked a training step
    unmeasured = [view for view in diag.ladder if view.rung in (2, 3, 4) and view.status == "skipped"]
    skipped = [view.rung for view in unmeasured if not (view.reason or "").startswith("not judged")]
    if unmeasured and not skipped:
        judged = diag.run.resolved_device or diag.run.expect_device or "cpu"
        rungs = ", ".join(str(view.rung) for view in unmeasured)
        return f"device: the run is judged for {judged}, with no accelerator: placement not measured (rungs {rungs})"
    if skipped:
        rungs = ", ".join(str(rung) for rung in skipped)
        return f"device: expected {expected}, not measured (no training step reached rungs {rungs})"
    return (
        f"device: expected {expected}, measured: model, data and ops on {expected} (no critical finding at rungs 1-4)"
    )


def _loader_verdict(diag: Diagnosis) -> str:
    steps = diag.run.steps
    if steps is None or not steps.steps:
        return "DataLoader: no training step was observed"
    workers = steps.loader.num_workers if steps.loader is not None else None
    share = key_numbers(diag).get(METRIC_PREFIX + "data_wait_pct")
    measured = f"the steps waited {share:.1f}% of their time for data" if share is not None else "no data wait"
    bound = next((f for f in diag.findings if f.code == "input-pipeline-bound"), None)
    if bound is None:
        outcome = "not a bottleneck"
    elif bound.severity is Severity.INFO:  # borderline: not clearly over the threshold once noise is allowed for
        outcome = f"borderline, not clearly a bottleneck ({bound.code}, info)"
    else:
        outcome = f"a bottleneck ({bound.code}, {bound.severity.value})"
    evaluation = next((f for f in diag.findings if f.code == "eval-loader-bound"), None)
    if evaluation is not None:  # the training loader keeps up, while an evaluation's stalls the job (a trial)
        share = evaluation.evidence.get("eval_wait_pct_of_steps")
        outcome += f"; the evaluation DataLoader held {share}% of the measured time ({evaluation.code})"
    return f"DataLoader num_workers={workers}: {measured}, {outcome}"
