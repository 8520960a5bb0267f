"""CPU work in the step, found by time: what a sampler of the training thread's stack saw (collectors/stack_sampler.py).

The op census counts torch ops; NumPy, PIL and plain Python in the loop are invisible to it and land in the step's
"other" part. The sampler reads the training thread's stack a few hundred times a second during its window of steps,
and counts, for each line of the user's code on the stack, how many samples it was on the stack (inclusive), in
which phase of the step (record/numbers.py's parts) and whether the thread was busy then (running on a core, or
runnable and waiting for one), not sleeping or blocked.

A line's share of the step is its on-CPU samples in the "other" phase over all samples taken inside steps: samples
are evenly spaced in time, so the proportion estimates the share of time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_LINES = 40


@dataclass
class SampledLine:
    where: str  # file:line of the user's code
    function: str | None = None  # qualified name, e.g. "random_shift_flip"
    samples: int = 0  # samples inside steps with this line on the stack
    on_cpu_samples: int = 0  # of those, samples where the thread was busy (running or runnable, not blocked)
    phase_samples: dict[str, int] = field(default_factory=dict)  # step part -> samples (inclusive)
    # busy, in the step's "other" part, not inside torch's own Python: CPU work no probe attributed
    other_on_cpu_samples: int = 0
    self_samples: int = 0  # samples where it was the innermost line of the user's code
    depth: int = 0  # user frames above it on the stack (0: the outermost user frame), the smallest seen
    library: str | None = None  # what ran at the top of the stack most often below it: numpy, PIL, torch, python


@dataclass
class SamplerSection:
    interval_s: float = 0.0  # aimed-at time between samples
    first_step: int | None = None
    last_step: int | None = None  # the last step sampled (inclusive)
    steps: int = 0  # steps sampled
    samples: int = 0  # samples taken inside those steps
    on_cpu_samples: int = 0
    phase_samples: dict[str, int] = field(default_factory=dict)  # step part -> samples
    cpu_clock: bool = False  # the thread's busy clock was readable (else every sample counts as busy)
    lines: list[SampledLine] = field(default_factory=list)  # the most sampled lines, at most MAX_LINES

    def measured_rungs(self) -> set[int]:
        return set()  # evidence for rung 4's CPU work in the step, next to the op census that measures the rung

    def unmeasured_rungs(self) -> dict[int, str]:
        return {}

    def self_check(self) -> list[str]:
        problems = []
        if sum(self.phase_samples.values()) != self.samples:
            problems.append("sampler: the phase samples do not add up to the samples")
        for line in self.lines:
            if line.samples > self.samples or line.other_on_cpu_samples > line.on_cpu_samples:
                problems.append(f"sampler: {line.where} has more samples than possible")
        return problems
