"""Step timing: where each training step's wall time went (data wait, compute, optimizer, other)."""

from __future__ import annotations

from dataclasses import dataclass, field

# A step's phases must add up to its wall time; timer resolution and float sums allow this much slack.
PHASE_SUM_TOLERANCE_S = 1e-6


@dataclass
class Step:
    index: int
    start_s: float  # seconds since the run started
    wall_s: float
    data_wait_s: float = 0.0
    compute_s: float = 0.0
    optimizer_s: float = 0.0
    other_s: float = 0.0

    def phase_sum_s(self) -> float:
        return self.data_wait_s + self.compute_s + self.optimizer_s + self.other_s


@dataclass
class StepsSection:
    steps: list[Step] = field(default_factory=list)

    def self_check(self) -> list[str]:
        problems = []
        for step in self.steps:
            if abs(step.phase_sum_s() - step.wall_s) > PHASE_SUM_TOLERANCE_S + 1e-9 * step.wall_s:
                problems.append(
                    f"step {step.index}: phases sum to {step.phase_sum_s():.9f}s, wall time is {step.wall_s:.9f}s"
                )
        return problems
