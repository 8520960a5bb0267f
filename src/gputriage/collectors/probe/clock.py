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
    # With a stand-in clock: the stand-in's time in each phase (only phases that had some); None without one.
    stand_in_phases_s: dict[str, float] | None = None


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
        self.backwards = 0  # backward passes so far: a loader whose batches have none between them is no training one
        # A preflight's stand-in clock (the host seconds the stand-in has cost so far), read at each phase change so
        # that its time is known per phase: a GPU runs that compute beside the host, so each phase's host time is its
        # wall time less its own stand-in time, not less a share of the step's total taken in some order.
        self.stand_in: Callable[[], float] | None = None
        self._stand_in_totals: dict[str, float] = {}
        self._last_stand_in_s = 0.0

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
        phase = (self._stack[-1] if self._stack else OTHER) if self.running else None
        if phase is not None:
            self._totals[phase] += now_s - self._last_s
        self._last_s = now_s
        if self.stand_in is not None:
            spent_s = self.stand_in()
            if phase is not None and spent_s > self._last_stand_in_s:
                self._stand_in_totals[phase] = self._stand_in_totals.get(phase, 0.0) + spent_s - self._last_stand_in_s
            self._last_stand_in_s = spent_s

    def push(self, phase: str) -> None:
        if threading.get_ident() != self._owner:
            return
        self._accrue(self._clock())
        self._stack.append(phase)
        if phase == "backward":
            self.backwards += 1

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
        self._stand_in_totals = {}
        if self.stand_in is not None:
            self._last_stand_in_s = self.stand_in()  # the stand-in's work before the step is not the step's
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
        stand_in = {k: v for k, v in self._stand_in_totals.items() if v > 0} if self.stand_in is not None else None
        times = StepTimes(self._step_start_s, wall_s, phases, stand_in)
        self._totals = dict.fromkeys(PHASES, 0.0)
        self._stand_in_totals = {}
        self._step_start_s = now_s
        self.running = keep_running
        return times

    def absorb(
        self, start_s: float, earlier: list[dict[str, float]], earlier_stand_in: list[dict[str, float]] | None = None
    ) -> None:
        """Fold already-cut steps back into the open one, which then starts at `start_s` (a clock reading)."""
        for phases in earlier:
            for name, value in phases.items():
                self._totals[name] += value
        for phases in earlier_stand_in or []:
            for name, value in phases.items():
                self._stand_in_totals[name] = self._stand_in_totals.get(name, 0.0) + value
        self._step_start_s = start_s
