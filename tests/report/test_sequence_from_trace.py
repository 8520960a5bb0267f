"""The sequence diagram of a trace-only run: the sync arrow is not a part of the step partition."""

from __future__ import annotations

import msgspec
from report_records import trace_only_run

from gputriage.record import Run
from gputriage.record.trace import StepBreakdown
from gputriage.report.diagrams import build_sequence


def _trace_run(kernel_pct: float, dataloader_pct: float, memcpy_pct: float, sync_pct: float) -> Run:
    run = trace_only_run(partition=True)
    assert run.trace is not None
    rank = run.trace.ranks[0]
    rest = 100.0 - kernel_pct - dataloader_pct - memcpy_pct
    rank.step_breakdown = StepBreakdown(
        kernel_pct=kernel_pct,
        memcpy_pct=memcpy_pct,
        memset_pct=0.0,
        runtime_pct=rest,  # what no arrow shows: the host in runtime calls, syncs among them
        dataloader_pct=dataloader_pct,
        cpu_exec_pct=0.0,
        other_pct=0.0,
    )
    assert rank.syncs is not None
    rank.syncs = msgspec.structs.replace(rank.syncs, blocking_pct_of_steps=sync_pct)
    return run


def test_the_sync_arrow_says_it_overlaps_the_computation() -> None:
    sequence = build_sequence(_trace_run(91.3, 0.0, 0.0, 34.5))
    sync = sequence.messages[3]
    assert sync.share_pct == 34.5
    assert "not in the partition" in sync.detail and "(in 3)" in sync.detail
    assert sequence.messages[2].highlighted  # 91.3% of the partition: nothing unknown could be larger


def test_the_sync_share_does_not_count_as_a_part_of_the_partition() -> None:
    # Kernels 40%, DataLoader 10%, memcpy 5%: 45% of the step is on no arrow, and could hold more than 40%. The syncs'
    # 50% overlaps the rest, so it must not fill that unknown 45% and let the kernels look like where the time goes.
    sequence = build_sequence(_trace_run(40.0, 10.0, 5.0, 50.0))
    assert not any(m.highlighted for m in sequence.messages)
