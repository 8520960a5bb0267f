"""The trace section: per-rank numbers from a PyTorch profiler (Kineto) trace, in DESIGN.md's contract."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class IdleBreakdown:
    host_wait_pct: float | None = None
    kernel_wait_pct: float | None = None
    other_pct: float | None = None


@dataclass
class RankTrace:
    """One rank's trace summary. A field the trace cannot give is None, never a guess."""

    rank: int | None = None
    device: str | None = None
    path: str | None = None
    steps: int | None = None
    window_us: float | None = None
    busy_pct: float | None = None
    idle_pct: float | None = None
    compute_pct: float | None = None
    non_compute_pct: float | None = None
    idle_breakdown: IdleBreakdown | None = None
    step_time_us: float | None = None
    busy_pct_of_steps: float | None = None
    dataloader_pct_of_step: float | None = None

    def self_check(self) -> list[str]:
        problems = []
        if self.busy_pct is not None and self.idle_pct is not None and abs(self.busy_pct + self.idle_pct - 100) > 0.01:
            problems.append(f"trace rank {self.rank}: busy {self.busy_pct} + idle {self.idle_pct} != 100")
        return problems


@dataclass
class TraceSection:
    ranks: list[RankTrace] = field(default_factory=list)

    def self_check(self) -> list[str]:
        return [p for r in self.ranks for p in r.self_check()]
