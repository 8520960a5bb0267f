"""CPU work in the step, found by time: what a sampler of the training thread's stack saw (collectors/stack_sampler.py).

The op census counts torch ops; NumPy, PIL and plain Python in the loop are invisible to it and land in the step's
"other" part. The sampler reads the training thread's stack a few hundred times a second during its window of steps,
and counts, for each line of the user's code on the stack (inclusive), the time it was there, in which phase of the
step (record/numbers.py's parts), and whether the thread was busy then (running on a core, or runnable and waiting for
one), not sleeping or blocked.

Each sample stands for the time since the one before: a thread that holds the GIL in a long NumPy call delays the
sampler, and a count of samples would under-weigh exactly the CPU work it looks for. A line's share of the step is its
busy time in the "other" part over all the time sampled inside steps.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from gputriage.record.steps import Step
from gputriage.stdlib import statistics

MAX_LINES = 40
# A step's stand-in compute counts at most this many times the window's median toward a GPU step (gpu_step_scale): on
# a shared machine a few steps' compute stalls ten to forty times over (two processes' thread pools on two cores).
STAND_IN_SPIKE_CAP = 2.0


class SampledLine(msgspec.Struct):
    where: str  # file:line of the user's code
    function: str | None = None  # qualified name of the function the line is in, e.g. "main"
    samples: int = 0  # samples inside steps with this line on the stack
    time_s: float = 0.0  # the time those samples stand for
    busy_s: float = 0.0  # of it, time the thread was busy (running or runnable, not blocked)
    phase_s: dict[str, float] = msgspec.field(default_factory=dict)  # step part -> time on the stack
    # busy, in the step's "other" part, not inside torch's own Python: CPU work no probe attributed
    other_busy_s: float = 0.0
    self_s: float = 0.0  # time as the innermost line of the user's code
    depth: int = 0  # user frames above it on the stack (0: the outermost user frame), the smallest seen
    library: str | None = None  # what ran at the top of the stack most often below it: numpy, PIL, torch, python


class SamplerSection(msgspec.Struct):
    interval_s: float = 0.0  # aimed-at time between samples
    first_step: int | None = None
    last_step: int | None = None  # the last step sampled (inclusive)
    steps: int = 0  # steps sampled
    samples: int = 0  # samples taken inside those steps
    time_s: float = 0.0  # the time they stand for
    busy_s: float = 0.0
    phase_s: dict[str, float] = msgspec.field(default_factory=dict)  # step part -> time
    busy_clock: bool = False  # the thread's busy clock was readable (else all time counts as busy)
    # On a preflight's stand-in: the host time its ops took to compute inside the window, which a GPU does not spend
    # on the host (see host_share_pct)
    stand_in_s: float | None = None
    lines: list[SampledLine] = msgspec.field(default_factory=list)  # the lines with the most time, at most MAX_LINES

    def measured_rungs(self) -> set[int]:
        return set()  # evidence for rung 4's CPU work in the step, next to the op census that measures the rung

    def unmeasured_rungs(self) -> dict[int, str]:
        return {}

    def share_pct(self, line: SampledLine) -> float:
        """The line's CPU work in the step's "other" part, as a share of the sampled step time."""
        return 100.0 * line.other_busy_s / self.time_s if self.time_s > 0 else 0.0

    def host_share_pct(self, line: SampledLine) -> float | None:
        """On a stand-in: the same share of the host's part of the step (the stand-in's compute left out). What a GPU
        step would show lies between the two, depending on how long the GPU computes, which a preflight cannot know:
        the finding is judged on the conservative share_pct and shows this one beside it."""
        if self.stand_in_s is None:
            return None
        host_s = self.time_s - self.stand_in_s
        return min(100.0, 100.0 * line.other_busy_s / host_s) if host_s > 0 else None

    def gpu_step_scale(self, steps: Sequence[Step], waits_every_step: bool) -> float | None:
        """On a stand-in that computed for real: the sampled step time over the longest the same steps can take on a
        GPU (at least 1), as long as the GPU runs the stand-in's ops at least as fast as this CPU did (any GPU against
        a few CPU cores). A GPU computes asynchronously, beside the host's part of the step, unless the step waits for
        the device every step (a host read each step): then the two add up, as on the stand-in. Each step's compute
        counts at most STAND_IN_SPIKE_CAP times the window's median, so a shared machine's stalls do not lengthen the
        GPU's step. A line's share of the sampled step times this is the least share it can have of a GPU step."""
        if self.stand_in_s is None or self.time_s <= 0:
            return None
        first, last = self.first_step, self.last_step
        window = [
            s
            for s in steps
            if first is not None and last is not None and first <= s.index <= last and s.stand_in_s is not None
        ]
        if not window:  # only the window's totals
            host_s = self.time_s - self.stand_in_s
            bound_s = self.time_s if waits_every_step else max(host_s, self.stand_in_s)
            return self.time_s / bound_s if bound_s > 0 else None
        spent = [s.stand_in_spent_s() for s in window]
        cap_s = STAND_IN_SPIKE_CAP * statistics.median(spent)
        bound_s = 0.0
        for step, stand_in_s in zip(window, spent, strict=True):
            host_s, gpu_s = step.wall_s - stand_in_s, min(stand_in_s, cap_s)
            bound_s += host_s + gpu_s if waits_every_step else max(host_s, gpu_s)
        wall_s = sum(s.wall_s for s in window)
        return max(1.0, wall_s / bound_s) if bound_s > 0 else None

    def self_check(self) -> list[str]:
        problems = []
        if abs(sum(self.phase_s.values()) - self.time_s) > 1e-5 * max(1.0, self.time_s):
            problems.append("sampler: the phase times do not add up to the sampled time")
        for line in self.lines:
            if line.time_s > self.time_s + 1e-9 or line.other_busy_s > line.busy_s + 1e-9:
                problems.append(f"sampler: {line.where} has more time than possible")
        return problems
