"""Exclusive phase accounting: at any moment exactly one phase owns the clock, so phases add up to wall time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import msgspec

OTHER = "other"
PHASES = ("data_wait", "h2d", "forward", "sync", "backward", "optimizer", OTHER)


class StepTimes(msgspec.Struct):
    start_s: float  # clock reading when the step began
    wall_s: float
    phases_s: dict[str, float] = msgspec.field(default_factory=dict)


class PhaseClock:
    """A stack of phases; the top one accrues time.

    Nesting is exclusive: a `.to()` inside forward counts as h2d, not twice. Time outside any phase is "other".
    The clock is injectable so tests can assert exact phase times.
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        # Only the thread that runs the training loop owns the phases; a prefetch thread's `.to()` must not
        # push onto the loop's stack.
        self._owner = threading.get_ident()
        self._stack: list[str] = []
        self._totals: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self._step_start_s = clock()
        self._last_s = self._step_start_s
        self.running = False  # no step is open (before the first step, between epochs of a loader-driven job)

    def now(self) -> float:
        return self._clock()

    @property
    def phase(self) -> str | None:
        """The phase that owns the clock now; None between steps. Read from any thread (the stack sampler)."""
        if not self.running:
            return None
        top = self._stack[-1:]  # one read: the owner thread may pop meanwhile
        return top[0] if top else OTHER

    def _accrue(self, now_s: float) -> None:
        if self.running:
            phase = self._stack[-1] if self._stack else OTHER
            self._totals[phase] += now_s - self._last_s
        self._last_s = now_s

    def push(self, phase: str) -> None:
        if threading.get_ident() != self._owner:
            return
        self._accrue(self._clock())
        self._stack.append(phase)

    def pop(self) -> None:
        if threading.get_ident() != self._owner:
            return
        self._accrue(self._clock())
        if self._stack:
            self._stack.pop()

    def begin(self) -> None:
        """Open a step now (the first step, or the first batch after a pause)."""
        now_s = self._clock()
        self._totals = dict.fromkeys(PHASES, 0.0)
        self._step_start_s = now_s
        self._last_s = now_s
        self.running = True

    def cut(self, *, keep_running: bool = True) -> StepTimes | None:
        """Close the open step and (by default) open the next one at the same instant."""
        if not self.running:
            return None
        now_s = self._clock()
        self._accrue(now_s)
        wall_s = now_s - self._step_start_s
        phases = dict(self._totals)
        # Whatever float rounding left over belongs to "other", so the phases add up to the wall exactly.
        phases[OTHER] = max(0.0, wall_s - sum(v for k, v in phases.items() if k != OTHER))
        times = StepTimes(self._step_start_s, wall_s, phases)
        self._totals = dict.fromkeys(PHASES, 0.0)
        self._step_start_s = now_s
        self.running = keep_running
        return times

    def absorb(self, start_s: float, earlier: list[dict[str, float]]) -> None:
        """Fold already-cut steps back into the open one, which then starts at `start_s` (a clock reading)."""
        for phases in earlier:
            for name, value in phases.items():
                self._totals[name] += value
        self._step_start_s = start_s
