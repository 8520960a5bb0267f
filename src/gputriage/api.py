"""The Python API (`gputriage.session`): what `gputriage run` records, around a block of code in this process.

with gputriage.session(expect_device="cuda") as s:
    train()
s.report()          # the terminal report (in a notebook: the cell output)
s.findings          # [Finding, ...], most likely root cause first
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from gputriage.collectors.runner import Outcome
from gputriage.collectors.session import DEFAULT_STEPS, JobObservers, ObserveConfig, new_run
from gputriage.diagnosis import Diagnosis, diagnose
from gputriage.findings import Finding
from gputriage.record import Run

SESSION_TARGET = "gputriage.session()"


class Session:
    """Records while the `with` block runs; afterwards holds the Run record and its diagnosis."""

    def __init__(self, expect_device: str | None = None, steps: int | None = DEFAULT_STEPS) -> None:
        self.expect_device = expect_device
        self.steps = steps
        self.run: Run | None = None
        self._diagnosis: Diagnosis | None = None
        self._observers: JobObservers | None = None
        self._start_s = 0.0

    def __enter__(self) -> Session:
        self.run = new_run("run", list(sys.argv), self.expect_device)
        config = ObserveConfig(self.expect_device, self.steps, distributed=False)
        self._observers = JobObservers(self.run, config)
        self._observers.start()
        self._start_s = time.perf_counter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self.run is not None and self._observers is not None
        outcome = Outcome(exit_code=0 if exc is None else 1, exception=exc)
        if isinstance(exc, KeyboardInterrupt):
            outcome.signal = "SIGINT"
        outcome.wall_s = time.perf_counter() - self._start_s
        self._observers.finish(outcome, SESSION_TARGET)
        self._diagnosis = diagnose(self.run)

    def start(self) -> Session:
        """Begin recording outside a `with` block: a framework callback's train-begin hook."""
        return self.__enter__()

    def stop(self, exc: BaseException | None = None) -> Diagnosis:
        """End recording (a framework callback's train-end hook); `exc` is what ended the training, if anything."""
        self.__exit__(None if exc is None else type(exc), exc, None)
        return self.diagnosis

    def _repr_html_(self) -> str | None:
        """Jupyter shows a finished session as its HTML report."""
        if self._diagnosis is None:
            return None
        from gputriage.report.notebook import diagnosis_html

        return diagnosis_html(self._diagnosis)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's text view: the terminal report, or that the session still records."""
        from gputriage.report.notebook import diagnosis_text

        recording = "<gputriage session: recording>"
        printer.text(diagnosis_text(self._diagnosis) if self._diagnosis is not None else recording)

    @property
    def diagnosis(self) -> Diagnosis:
        if self._diagnosis is None:
            raise RuntimeError("the session is still recording; read its findings after the `with` block")
        return self._diagnosis

    @property
    def findings(self) -> list[Finding]:
        """The findings, most likely root cause first."""
        return self.diagnosis.findings

    def report(self, out: str | Path | None = None, stream: TextIO | None = None) -> None:
        """Print the terminal report (to stdout, or `stream`); with `out`, also write report.json and friends there."""
        from gputriage.report.output import OutputOptions, emit

        emit(self.diagnosis, OutputOptions(out_dir=Path(out) if out is not None else None, terminal_stream=stream))


def session(expect_device: str | None = None, steps: int | None = DEFAULT_STEPS) -> Session:
    """Record rungs 1-5 around a block of code in this process (a notebook cell, a custom training loop).

    Args:
        expect_device: the device the code is meant to use; default: the first available accelerator.
        steps: observe this many training steps, then let the code run untouched.
    """
    return Session(expect_device, steps)
