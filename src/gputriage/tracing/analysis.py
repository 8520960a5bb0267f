"""Per-rank numbers with upstream definitions: HTA's temporal and idle breakdowns, the TensorBoard plugin's steps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gputriage.record.trace import IdleBreakdown, StepBreakdown, StreamIdle
from gputriage.tracing.collect import MEMORY, Table
from gputriage.tracing.intervals import Spans, intersect, union
from gputriage.tracing.prepared import Prepared

# HTA's get_idle_time_breakdown(consecutive_kernel_delay=30): a gap shorter than this between two kernels on one
# stream, whose kernel was already enqueued, is launch overhead ("kernel wait"). HTA's unit is the trace's, µs.
CONSECUTIVE_KERNEL_DELAY_NS = 30_000


def pct(part: float, whole: float) -> float | None:
    return round(float(100.0 * part / whole), 3) if whole > 0 else None


@dataclass
class Temporal:
    window_ns: int
    busy_ns: int
    compute_ns: int
    comm_ns: int
    memory_ns: int


def temporal(p: Prepared) -> Temporal | None:
    """HTA's temporal breakdown: window = first GPU event start to last GPU event end (all streams).

    idle = window - union(all GPU events); compute = union(compute kernels); non-compute = busy - compute. HTA
    rounds ns-resolution timestamps to whole µs (ceil the start, floor the end); we keep the nanoseconds.
    """
    window = p.window
    if window is None:
        return None
    busy = p.busy.total()
    compute = p.compute.total()
    comm_only = p.comm.minus(p.compute).total()
    return Temporal(window[1] - window[0], busy, compute, comm_only, busy - compute - comm_only)


def idle_breakdown(p: Prepared) -> tuple[IdleBreakdown | None, list[StreamIdle]]:
    """HTA's idle breakdown per stream, and its sum over the streams as one rank-level split.

    On each stream, in start order, the gap before a kernel is "host wait" when the kernel's launch call started
    after the previous kernel ended (the CPU was late), "kernel wait" when it is shorter than
    CONSECUTIVE_KERNEL_DELAY_NS, and "other" otherwise (waiting on another stream, an event, ...).
    """
    g = p.col.gpu
    if not len(g):
        return None, []
    runtime_ts = p.runtime_ts_for(g.corr)
    totals = np.zeros(3)
    streams: list[StreamIdle] = []
    for stream in np.unique(g.lane):
        on = np.flatnonzero(g.lane == stream)
        order = on[np.argsort(g.ts[on], kind="stable")]
        if len(order) < 2:
            continue
        prev_end = g.end[order][:-1]
        # Overlapping work on one stream (seen on MTIA) is not idle time; HTA sums such negative gaps, we clamp them.
        gap = np.maximum(g.ts[order][1:] - prev_end, 0).astype(np.float64)
        host = runtime_ts[order][1:] > prev_end
        kernel = ~host & (gap < CONSECUTIVE_KERNEL_DELAY_NS)
        other = ~host & ~kernel
        split = np.array([gap[host].sum(), gap[kernel].sum(), gap[other].sum()])
        idle = split.sum()
        totals += split
        if idle > 0:
            shares = 100.0 * split / idle
            streams.append(StreamIdle(int(stream), round(float(idle) / 1000, 3), *(round(float(s), 3) for s in shares)))
    whole = totals.sum()
    if whole <= 0:
        return IdleBreakdown(0.0, 0.0, 0.0) if len(g) > 1 else None, streams
    shares = [round(float(100.0 * t / whole), 3) for t in totals]
    return IdleBreakdown(*shares), streams


@dataclass
class Steps:
    spans: Spans
    step_time_us: float
    kernel_pct: float | None
    dataloader_pct: float | None
    dataloader_us_per_step: float
    breakdown: StepBreakdown | None


def steps(p: Prepared) -> Steps | None:
    """The TensorBoard plugin's step view over the ProfilerStep spans.

    Each instant of a step is given to the first category that covers it: kernel, memcpy, memset, runtime,
    DataLoader, other CPU op, else "other". "GPU utilization" is the kernel share; the DataLoader share is the
    time in `enumerate(DataLoader)#...__next__` (or DataPipe) not hidden under GPU or runtime work.
    """
    spans = p.steps
    if not len(spans):
        return None
    lo, hi = int(spans.start[0]), int(spans.end[-1])
    total = spans.total()
    g = p.col.gpu
    names = p.names
    is_memset = np.fromiter((n.startswith("Memset") for n in names), dtype=bool, count=len(names))
    memset_rows = is_memset[g.name] if len(names) else np.zeros(len(g), dtype=bool)
    memory_rows = p.gpu_kind == MEMORY
    # Built one at a time (each is as long as its events), so only one layer's temporaries are alive at once.
    layers: list[Callable[[], Spans]] = [
        lambda: _table_union(p.kernels),
        lambda: union(g.ts[memory_rows & ~memset_rows], g.end[memory_rows & ~memset_rows]),
        lambda: union(g.ts[memset_rows], g.end[memset_rows]),
        lambda: union(p.col.runtime.ts, p.col.runtime.end),
        lambda: p.dataloader,
        lambda: _table_union(p.cpu_ops),
    ]
    claimed = Spans.empty()
    shares: list[float] = []
    for layer in layers:
        mine = _within(layer().clip(lo, hi), spans).minus(claimed)
        shares.append(mine.total())
        claimed = union(np.concatenate((claimed.start, mine.start)), np.concatenate((claimed.end, mine.end)))
    shares.append(total - sum(shares))
    breakdown = StepBreakdown(*(pct(s, total) or 0.0 for s in shares))
    return Steps(
        spans=spans,
        step_time_us=total / len(spans) / 1000,
        kernel_pct=pct(shares[0], total),
        dataloader_pct=pct(shares[4], total),
        dataloader_us_per_step=shares[4] / len(spans) / 1000,
        breakdown=breakdown,
    )


def _table_union(table: Table) -> Spans:
    return union(table.ts, table.end)


def _within(layer: Spans, steps: Spans) -> Spans:
    return intersect(layer, steps)
