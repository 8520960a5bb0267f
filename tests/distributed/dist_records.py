"""Saved per-rank records, built the way a rank of a torchrun job would have written them."""

from __future__ import annotations

from collections.abc import Callable

from gputriage.record import Run
from gputriage.record.ranks import CollectiveEvent, CollectiveStats
from gputriage.record.steps import Step

RankFactory = Callable[..., Run]


def steps_with(data_wait_s: float, compute_s: float, wait_s: float, n: int = 6) -> tuple[list[Step], CollectiveStats]:
    """n lock-step DDP steps: the rank waits for data, computes, then waits wait_s in the gradient all-reduce."""
    steps, events = [], []
    wall_s = data_wait_s + compute_s + wait_s
    for i in range(n):
        start_s = 1.0 + i * wall_s
        phases = {"data_wait_s": data_wait_s, "forward_s": compute_s, "backward_s": wait_s}
        steps.append(Step(index=i, start_s=start_s, wall_s=wall_s, **phases))
        events.append(CollectiveEvent(op="ddp_allreduce", t_s=start_s + data_wait_s + compute_s, wait_s=wait_s))
    stats = CollectiveStats(calls=n, wait_s=wait_s * n, ddp_timed=True, events=events)
    return steps, stats
