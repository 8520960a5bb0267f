"""Per-rank numbers with upstream definitions: HTA's temporal and idle breakdowns, the TensorBoard plugin's steps.

Each is an accumulator fed one window at a time (sweep.py); the windows add up to the whole trace exactly.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import numpy as np
import numpy.typing as npt

from gputriage.record.trace import IdleBreakdown, StepBreakdown, StreamIdle
from gputriage.tracing import names as N
from gputriage.tracing.families import CPU_OP
from gputriage.tracing.intervals import Spans, intersect, union
from gputriage.tracing.sweep import Window

# HTA's get_idle_time_breakdown(consecutive_kernel_delay=30): a gap shorter than this between two kernels on one
# stream, whose kernel was already enqueued, is launch overhead ("kernel wait"). HTA's unit is the trace's, µs.
CONSECUTIVE_KERNEL_DELAY_NS = 30_000
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
MAX_STREAMS = 4096  # streams reported one by one (a hostile trace can name millions; the totals keep them all)
# Streams new to one stretch of the timeline whose first kernel is kept, for the gap since the stream's last kernel in
# the stretch before: a real trace has a few dozen streams; a hostile one with millions (1 µs kernels, each on its own
# stream) held a gigabyte here. Past the bound, a stream's first gap in a stretch counts in no stream's breakdown.
MAX_FIRST_SEEN = 4 * MAX_STREAMS
MAX_STEP_TIMES = 1000


def pct(part: float, whole: float) -> float | None:
    return round(float(100.0 * part / whole), 3) if whole > 0 else None


class Temporal(msgspec.Struct):
    """HTA's temporal breakdown: window = first GPU event start to last GPU event end (all streams).

    idle = window - union(all GPU events); compute = union(compute kernels); non-compute = busy - compute. HTA
    rounds ns-resolution timestamps to whole µs (ceil the start, floor the end); we keep the nanoseconds.
    """

    busy_ns: int = 0
    compute_ns: int = 0
    comm_ns: int = 0  # communication not overlapped by compute

    def add(self, w: Window) -> None:
        self.busy_ns += w.busy.total()
        self.compute_ns += w.compute.total()
        self.comm_ns += w.exposed_comm.total()

    def merge(self, later: Temporal) -> None:
        """Add what a sweep of the next stretch of the timeline found (segments.py); the same for every merge."""
        self.busy_ns += later.busy_ns
        self.compute_ns += later.compute_ns
        self.comm_ns += later.comm_ns

    @property
    def memory_ns(self) -> int:
        return self.busy_ns - self.compute_ns - self.comm_ns


class _Stream(msgspec.Struct):
    last_end: int
    split: npt.NDArray[np.float64] = msgspec.field(default_factory=lambda: np.zeros(3))


class IdleByStream(msgspec.Struct):
    """HTA's idle breakdown per stream, and its sum over the streams as one rank-level split.

    On each stream, in start order, the gap before a kernel is "host wait" when the kernel's launch call started
    after the previous kernel ended (the CPU was late), "kernel wait" when it is shorter than
    CONSECUTIVE_KERNEL_DELAY_NS, and "other" otherwise (waiting on another stream, an event, ...).
    """

    streams: dict[int, _Stream] = msgspec.field(default_factory=dict)
    overflow: npt.NDArray[np.float64] = msgspec.field(default_factory=lambda: np.zeros(3))
    rows: int = 0
    # Each stream's first kernel here, (start, launch start): its gap is known only once the stretch of the
    # timeline before this one is merged in (segments.py).
    first_seen: dict[int, tuple[int, float]] = msgspec.field(default_factory=dict)

    def add(self, w: Window) -> None:
        new = np.flatnonzero(w.gpu_new)
        if not len(new):
            return
        self.rows += len(new)
        stream = w.gpu["stream"][new]
        order = np.argsort(stream, kind="stable")  # rows are in start order already; this groups the streams
        rows = new[order]
        stream = stream[order]
        ts, end = w.gpu["ts"][rows], w.gpu["end"][rows]
        launch = w.launch_ts[rows]
        first = np.flatnonzero(np.concatenate(([True], stream[1:] != stream[:-1])))
        prev = np.zeros(len(rows), dtype=np.int64)
        prev[1:] = end[:-1]
        valid = np.ones(len(rows), dtype=bool)
        for i, s in zip(first.tolist(), stream[first].tolist(), strict=True):
            known = self.streams.get(s)
            valid[i] = known is not None
            prev[i] = known.last_end if known is not None else 0
            if known is None and s not in self.first_seen and len(self.first_seen) < MAX_FIRST_SEEN:
                self.first_seen[s] = (int(ts[i]), float(launch[i]))
        sums = np.add.reduceat(_split_gaps(ts, prev, launch, valid), first, axis=1)
        stops = np.append(first[1:], len(rows)) - 1
        for j, s in enumerate(stream[first].tolist()):
            self._update(s, int(end[stops[j]]), sums[:, j])

    def merge(self, later: IdleByStream) -> None:
        """Continue with the next stretch of the timeline: each stream's first gap there is found now."""
        self.rows += later.rows
        self.overflow += later.overflow
        for s, state in later.streams.items():
            split = state.split.copy()
            known = self.streams.get(s)
            if known is not None and s in later.first_seen:
                ts, launch = later.first_seen[s]
                split += _split_gaps(
                    np.array([ts]), np.array([known.last_end]), np.array([launch]), np.ones(1, dtype=bool)
                )[:, 0]
            self._update(s, state.last_end, split)
        for s, seen in later.first_seen.items():
            if s not in self.streams and len(self.first_seen) < MAX_FIRST_SEEN:
                self.first_seen.setdefault(s, seen)

    def _update(self, stream: int, last_end: int, split: npt.NDArray[np.float64]) -> None:
        known = self.streams.get(stream)
        if known is None:
            if len(self.streams) >= MAX_STREAMS:
                self.overflow += split
                return
            known = self.streams[stream] = _Stream(last_end)
        known.split += split
        known.last_end = last_end

    def result(self) -> tuple[IdleBreakdown | None, list[StreamIdle]]:
        if not self.rows:
            return None, []
        totals = self.overflow.copy()
        out: list[StreamIdle] = []
        for stream in sorted(self.streams):
            split = self.streams[stream].split
            totals += split
            idle = split.sum()
            if idle > 0:
                shares = 100.0 * split / idle
                out.append(StreamIdle(stream, round(float(idle) / 1000, 3), *(round(float(s), 3) for s in shares)))
        whole = totals.sum()
        if whole <= 0:
            return (IdleBreakdown(0.0, 0.0, 0.0) if self.rows > 1 else None), out
        return IdleBreakdown(*(round(float(100.0 * t / whole), 3) for t in totals)), out


def _split_gaps(ts: I64, prev: I64, launch: npt.NDArray[np.float64], valid: npt.NDArray[np.bool_]) -> F64:
    """Each kernel's gap since the previous one on its stream, as (host wait, kernel wait, other) rows."""
    # Overlapping work on one stream (seen on MTIA) is not idle time; HTA sums such negative gaps, we clamp them.
    gap = np.where(valid, np.maximum(ts - prev, 0), 0).astype(np.float64)
    host = valid & (launch > prev)
    kernel = valid & ~host & (gap < CONSECUTIVE_KERNEL_DELAY_NS)
    other = valid & ~host & ~kernel
    return np.stack([np.where(host, gap, 0), np.where(kernel, gap, 0), np.where(other, gap, 0)])


class StepResult(msgspec.Struct):
    count: int
    total_ns: int
    step_time_us: float
    kernel_pct: float | None
    dataloader_pct: float | None
    dataloader_us_per_step: float
    breakdown: StepBreakdown
    times_us: list[float]


def _breakdown(shares_pct: list[float], comm_pct: float | None) -> StepBreakdown:
    kernel, memcpy, memset, runtime, dataloader, cpu_exec, other = shares_pct
    return StepBreakdown(kernel, memcpy, memset, runtime, dataloader, cpu_exec, other, comm_pct)


class Steps(msgspec.Struct):
    """The TensorBoard plugin's step view over the ProfilerStep spans.

    Each instant of a step is given to the first category that covers it: kernel, memcpy, memset, runtime,
    DataLoader, other CPU op, else "other". "GPU utilization" is the kernel share; the DataLoader share is the
    time in `enumerate(DataLoader)#...__next__` (or DataPipe) not hidden under GPU or runtime work.
    """

    count: int = 0
    total_ns: int = 0
    times_us: list[float] = msgspec.field(default_factory=list)
    shares_ns: npt.NDArray[np.int64] = msgspec.field(default_factory=lambda: np.zeros(6, np.int64))
    comm_ns: int = 0  # of the kernel share: communication with no compute beside it (Temporal's comm, in the steps)

    def add(self, w: Window) -> None:
        new_steps = w.step_mask & w.cpu_new
        if new_steps.any():
            durations = w.cpu["end"][new_steps] - w.cpu["ts"][new_steps]
            self.count += len(durations)
            self.total_ns += int(durations.sum())
            room = MAX_STEP_TIMES - len(self.times_us)
            self.times_us.extend(round(float(d) / 1000, 3) for d in durations[:room].tolist())
        steps = w.steps
        if not len(steps):
            return
        gpu, memset = w.gpu, w.gpu_has(N.MEMSET)
        memory = w.gpu_has(N.MEMORY)
        layers: tuple[Callable[[], Spans], ...] = (
            lambda: w.spans(gpu, w.gpu_kernel),
            lambda: w.spans(gpu, memory & ~memset),
            lambda: w.spans(gpu, memset),
            lambda: w.spans(w.runtime),
            lambda: w.dataloader,
            lambda: w.spans(w.cpu, w.cpu["kind"] == CPU_OP),
        )
        claimed = Spans.empty()
        for i, layer in enumerate(layers):  # built one at a time: only one layer's temporaries are alive at once
            mine = intersect(layer(), steps).minus(claimed)
            self.shares_ns[i] += mine.total()
            claimed = union(np.concatenate((claimed.start, mine.start)), np.concatenate((claimed.end, mine.end)))
        self.comm_ns += intersect(w.exposed_comm, steps).total()

    def merge(self, later: Steps) -> None:
        self.count += later.count
        self.total_ns += later.total_ns
        self.times_us.extend(later.times_us[: MAX_STEP_TIMES - len(self.times_us)])
        self.shares_ns += later.shares_ns
        self.comm_ns += later.comm_ns

    def result(self) -> StepResult | None:
        if not self.count:
            return None
        total = self.total_ns
        shares = [int(s) for s in self.shares_ns]
        shares.append(total - sum(shares))
        return StepResult(
            count=self.count,
            total_ns=total,
            step_time_us=total / self.count / 1000,
            kernel_pct=pct(shares[0], total),
            dataloader_pct=pct(shares[4], total),
            dataloader_us_per_step=shares[4] / self.count / 1000,
            breakdown=_breakdown([pct(s, total) or 0.0 for s in shares], pct(self.comm_ns, total)),
            times_us=self.times_us,
        )
