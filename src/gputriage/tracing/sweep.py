"""The timeline, one window of time at a time: rows merged from the sorted runs, analysed, then let go.

A window owns the time [lo, hi). It holds the rows that start in it, plus the rows carried from earlier windows
that are still running at lo (a ProfilerStep, a long kernel, the user's open Python frames). Every measure of time
(unions, overlaps, gaps) is clipped to [lo, hi), so windows add up exactly; counts and durations are taken from
the rows that start in the window. Where a window ends is chosen so that as little as possible spans the cut:
inside a stretch where the GPU is busy (no idle gap is cut in two) and outside any long CPU op. Only when no such
instant exists within the window's size limit is a window cut elsewhere; the few quantities that then change are
named in docs/trace.md.

The window's size limit bounds memory: a window holds at most WINDOW_ROWS rows, whatever the trace's size.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from gputriage.errors import InputError
from gputriage.tracing import names as N
from gputriage.tracing.collect import Collected
from gputriage.tracing.distinct import distinct
from gputriage.tracing.families import CPU_OP, PYTHON
from gputriage.tracing.intervals import Spans, union
from gputriage.tracing.store import LAYOUTS, Columns, Layout, Run, RunCursor, concat, empty, length, take

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

WINDOW_ROWS = 400_000
# Rows that may start at one instant (a window takes them together): a profiler writes a few dozen at most.
MAX_SAME_INSTANT_ROWS = WINDOW_ROWS
MAX_CARRIED_ROWS = 100_000  # rows still running at a cut (normally a few dozen: open frames, a step, a kernel)
CPU_OP_MIN_NS = 50_000  # CPU ops shorter than this are dispatch overhead, not computation (cpu_compute)
RING_CALLS = 262_144  # recent runtime calls kept to find a kernel's launch across windows
TIME_MIN, TIME_MAX = -(2**63), 2**63 - 1


class Context(msgspec.Struct):
    """Trace-wide facts, known after pass one and before the sweep."""

    names: list[str]
    bits: npt.NDArray[np.uint32]
    wheres: list[str]
    lanes: list[tuple[Any, Any]]
    main_lane: int  # -1: none
    step_rows: int  # ProfilerStep spans on the main thread
    gpu_rows: int
    gpu_first: int | None
    gpu_last: int | None
    d2h_corr: I64  # sorted
    first_op_ts: int | None

    @property
    def window_ns(self) -> int | None:
        if self.gpu_first is None or self.gpu_last is None:
            return None
        return self.gpu_last - self.gpu_first

    @property
    def has_steps(self) -> bool:
        return self.step_rows > 0


def context_of(col: Collected) -> Context:
    bits = np.array(col.name_bits, dtype=np.uint32)
    main = main_lane(col)
    steps = int(col.lane_stats.steps[main]) if 0 <= main < len(col.lane_stats.steps) else 0
    return Context(
        names=col.names,
        bits=bits,
        wheres=col.wheres,
        lanes=col.lanes,
        main_lane=main,
        step_rows=steps,
        gpu_rows=col.gpu_rows,
        gpu_first=col.gpu_first_ts,
        gpu_last=col.gpu_last_end,
        d2h_corr=col.d2h_corr,
        first_op_ts=col.first_op_ts,
    )


def main_lane(col: Collected) -> int:
    """The thread that runs the training loop.

    The one with ProfilerStep spans, else the one that iterates the DataLoader, else the process's main thread
    (tid == pid, pid 0 aside; autograd's backward thread often launches more kernels), else the busiest launcher.
    """
    stats = col.lane_stats
    for counts in (stats.steps, stats.loader):
        if len(counts) and counts.max() > 0:
            return int(counts.argmax())
    for lane, (pid, tid) in enumerate(col.lanes):
        # pid 0 is no process: Kineto files Python threads it could not place there (a logging thread's
        # python_function events under pid 0 / tid 0 took the gaps of a real trace for "Python between the ops")
        if str(pid) == "0" or lane >= len(stats.cpu) or stats.cpu[lane] == 0:
            continue
        if pid == tid or str(pid) == str(tid):
            return lane
    for counts in (stats.runtime, stats.cpu):
        if len(counts) and counts.max() > 0:
            return int(counts.argmax())
    return -1


class Window(msgspec.Struct, dict=True):  # dict: the cached properties
    """The rows of one window of time, and what is derived from them (computed once, on first use)."""

    ctx: Context
    lo: int
    hi: int
    gpu: Columns
    runtime: Columns
    cpu: Columns
    final: bool
    recent_launches: tuple[I64, I64]  # (corr, ts) of runtime calls before this window (the most recent ones)
    forced_cut: bool = False
    _lane_ops: dict[int, tuple[I64, I64, npt.NDArray[np.int32]]] = msgspec.field(default_factory=dict)

    # ---- masks
    @cached_property
    def gpu_bits(self) -> npt.NDArray[np.uint32]:
        return self.ctx.bits[self.gpu["name"]]

    @cached_property
    def runtime_bits(self) -> npt.NDArray[np.uint32]:
        return self.ctx.bits[self.runtime["name"]]

    @cached_property
    def cpu_bits(self) -> npt.NDArray[np.uint32]:
        return self.ctx.bits[self.cpu["name"]]

    @cached_property
    def gpu_new(self) -> Mask:
        return _at_or_after(self.gpu["ts"], self.lo)

    @cached_property
    def runtime_new(self) -> Mask:
        return _at_or_after(self.runtime["ts"], self.lo)

    @cached_property
    def cpu_new(self) -> Mask:
        return _at_or_after(self.cpu["ts"], self.lo)

    def gpu_has(self, flag: int) -> Mask:
        return _any_bit(self.gpu_bits, flag)

    def runtime_has(self, flag: int) -> Mask:
        return _any_bit(self.runtime_bits, flag)

    def cpu_has(self, flag: int) -> Mask:
        return _any_bit(self.cpu_bits, flag)

    @cached_property
    def runtime_sync(self) -> Mask:
        """The runtime calls that block the host on the device: the sync calls, and copies whose transfer went
        device-to-host (hipMemcpyWithStream, cudaMemcpyAsync then waited on). One definition for the syncs' summary
        and for what the main thread does in a gap."""
        corr = self.runtime["corr"]
        d2h = np.isin(corr, self.ctx.d2h_corr) & (corr >= 0) if len(self.ctx.d2h_corr) else np.zeros(len(corr), bool)
        out: Mask = self.runtime_has(N.SYNC_CALL) | d2h
        return out

    @cached_property
    def gpu_compute(self) -> Mask:
        return ~_any_bit(self.gpu_bits, N.COMM | N.MEMORY)

    @cached_property
    def gpu_kernel(self) -> Mask:
        """Compute and communication kernels (not copies or memsets)."""
        return ~self.gpu_has(N.MEMORY)

    @cached_property
    def cpu_not_python(self) -> Mask:
        out: Mask = self.cpu["kind"] != PYTHON
        return out

    @cached_property
    def cpu_on_main(self) -> Mask:
        out: Mask = self.cpu["lane"] == self.ctx.main_lane
        return out

    @cached_property
    def runtime_on_main(self) -> Mask:
        out: Mask = self.runtime["lane"] == self.ctx.main_lane
        return out

    # ---- spans (all clipped to [lo, hi))
    def spans(self, table: Columns, mask: Mask | None = None) -> Spans:
        ts, end = (table["ts"], table["end"]) if mask is None else (table["ts"][mask], table["end"][mask])
        return union(ts, end).clip(self.lo, self.hi)

    @cached_property
    def busy(self) -> Spans:
        return self.spans(self.gpu)

    @cached_property
    def compute(self) -> Spans:
        return self.spans(self.gpu, self.gpu_compute)

    @cached_property
    def comm(self) -> Spans:
        return self.spans(self.gpu, self.gpu_has(N.COMM))

    @cached_property
    def exposed_comm(self) -> Spans:
        """Communication with no compute kernel beside it: the time the GPU only waits on the collectives."""
        return self.comm.minus(self.compute)

    @cached_property
    def dataloader(self) -> Spans:
        """DataLoader annotations on the main thread (what the TensorBoard plugin counted as data loading)."""
        return self.spans(self.cpu, self.cpu_has(N.DATALOADER) & self.cpu_not_python & self.cpu_on_main)

    @cached_property
    def step_mask(self) -> Mask:
        return self.cpu_has(N.STEP) & self.cpu_on_main

    @cached_property
    def steps(self) -> Spans:
        return self.spans(self.cpu, self.step_mask)

    # ---- joins
    @cached_property
    def _launch_join(self) -> tuple[I64, npt.NDArray[np.bool_]]:
        """For each GPU row, the start of the runtime call with the same correlation id, and whether there is one.

        Only a call that started at or before the GPU row is its launch. A trace that puts the call after its kernel
        has the host's and the device's clocks out of step (no real trace we read does); such a delay would be
        negative, and whether the call was found would depend on where the timeline was cut into windows.
        """
        corr = self.gpu["corr"]
        ring_corr, ring_ts = self.recent_launches
        new = self.runtime_new
        keys = np.concatenate((ring_corr, self.runtime["corr"][new]))
        times = np.concatenate((ring_ts, self.runtime["ts"][new]))
        out = np.zeros(len(corr), dtype=np.int64)
        if not len(keys) or not len(corr):
            return out, np.zeros(len(corr), dtype=bool)
        order = np.argsort(keys, kind="stable")
        keys, times = keys[order], times[order]
        pos = np.clip(np.searchsorted(keys, corr), 0, len(keys) - 1)
        found = (keys[pos] == corr) & (corr >= 0) & (times[pos] <= self.gpu["ts"])
        out[found] = times[pos[found]]
        return out, found

    @property
    def launch_ns(self) -> I64:
        return self._launch_join[0]

    @property
    def launch_found(self) -> npt.NDArray[np.bool_]:
        return self._launch_join[1]

    @cached_property
    def launch_ts(self) -> npt.NDArray[np.float64]:
        """launch_ns as float64, NaN where there is none (HTA's comparison, kept bit for bit)."""
        out = self.launch_ns.astype(np.float64)
        out[~self.launch_found] = np.nan
        return out

    # ---- lookups on one thread
    def _ops_on(self, lane: int) -> tuple[I64, I64, npt.NDArray[np.int32]]:
        """CPU ops of one thread sorted by start (ts, end, name); built on first use, for queried threads only."""
        found = self._lane_ops.get(lane)
        if found is None:
            rows = np.flatnonzero((self.cpu["lane"] == lane) & (self.cpu["kind"] == CPU_OP))
            found = self._lane_ops[lane] = (self.cpu["ts"][rows], self.cpu["end"][rows], self.cpu["name"][rows])
        return found

    def enclosing_op(self, lane: int, ts: int, end: int) -> str | None:
        """The innermost CPU op around [ts, end] on a thread (e.g. aten::item around a cudaStreamSynchronize).

        Ops on one thread nest, so walking back from the last op that starts before `ts`, the first one that also
        ends after `end` is the innermost; the walk is bounded, since an op's children sit right before it.
        """
        starts, ends, names = self._ops_on(lane)
        if not len(starts):
            return None
        i = int(np.searchsorted(starts, ts, side="right")) - 1
        for j in range(i, max(i - 256, -1), -1):
            if ends[j] >= end:
                return self.ctx.names[int(names[j])]
        return None

    @cached_property
    def _frames(self) -> Columns:
        """The user's own Python frames that were entered while the profiler recorded.

        Kineto names a frame that was already running when the profiler started by the line it was on then (the
        prof.step() or optimizer step that opened the window) and keeps that name for the whole window: such a
        frame names no real place, so it is never a `where`.
        """
        keep = self.cpu["kind"] == PYTHON
        if self.ctx.first_op_ts is not None:
            keep &= self.cpu["ts"] >= self.ctx.first_op_ts
        return take(self.cpu, keep)

    @cached_property
    def _has_stacks(self) -> bool:
        return bool((self.cpu["where"] >= 0).any())

    def where_at(self, lane: int, ts: int, end: int) -> str | None:
        """The innermost user-code frame around [ts, end] on a thread (python_function events or 'Call stack')."""
        frames = self._frames
        hit = np.flatnonzero((frames["lane"] == lane) & (frames["ts"] <= ts) & (frames["end"] >= end))
        if len(hit):
            best = hit[np.argmax(frames["ts"][hit])]
            return N.user_frame(self.ctx.names[int(frames["name"][best])])
        return self.stack_where(lane, ts, end)

    def stack_where(self, lane: int, ts: int, end: int) -> str | None:
        """The innermost user frame from the 'Call stack' of a row around [ts, end] on a thread (older traces).

        A call stack is taken when the event happened, so its line is the line that ran then.
        """
        if not self._has_stacks:
            return None
        where = self.cpu["where"]
        hit = np.flatnonzero(
            (where >= 0) & (self.cpu["lane"] == lane) & (self.cpu["ts"] <= ts) & (self.cpu["end"] >= end)
        )
        if not len(hit):
            return None
        best = hit[np.argmax(self.cpu["ts"][hit])]
        return self.ctx.wheres[int(where[best])]


def _any_bit(bits: npt.NDArray[np.uint32], flag: int) -> Mask:
    out: Mask = (bits & np.uint32(flag)) != 0
    return out


def _at_or_after(ts: I64, lo: int) -> Mask:
    out: Mask = ts >= lo
    return out


# ---- the windows


class Segment(msgspec.Struct):
    """A stretch of the timeline swept on its own: from `lo` to `stop` (None: to the end of the trace).

    `lo` is a cut that the whole sweep could have made (see segments.py), and what a sweep from the start would carry
    across it is given: the rows still running at lo, and the most recent runtime calls.
    """

    lo: int
    stop: int | None
    rows: dict[str, list[tuple[int, int]]]  # per layout, per run: the row numbers [start, stop) in this stretch
    carried: dict[str, Columns]
    ring: tuple[I64, I64]
    graph_corr: I64 = msgspec.field(default_factory=lambda: np.zeros(0, np.int64))  # CUDA graph launches before lo


class _Family:
    """The runs of one row layout, merged forward in time."""

    def __init__(self, layout: Layout, runs: list[Run], rows: list[tuple[int, int]] | None = None) -> None:
        self.layout = layout
        spans = rows if rows is not None else [(0, r.count) for r in runs]
        self.cursors = [RunCursor(r, a, b) for r, (a, b) in zip(runs, spans, strict=True) if b > a]

    @property
    def remaining(self) -> int:
        return sum(c.remaining for c in self.cursors)

    def bound(self, quota: int) -> int | None:
        """A time below which each run has at most `quota` rows not yet taken (None: every run fits)."""
        bound: int | None = None
        for cursor in self.cursors:
            ts = cursor.peek_ts(quota + 1)
            if ts is not None:
                bound = ts if bound is None else min(bound, ts)
        return bound

    def take_below(self, ts: int | None) -> Columns:
        parts = [c.take_below(ts) for c in self.cursors]
        rows = concat([p for p in parts if length(p)], self.layout)
        if len(self.cursors) > 1 and length(rows):
            # Runs are in file order, so a stable sort keeps the file's order among rows that start together.
            order = np.argsort(rows["ts"], kind="stable")
            rows = take(rows, order)
        return rows


def iterate_windows(
    ctx: Context, runs: dict[str, list[Run]], window_rows: int | None = None, segment: Segment | None = None
) -> Iterator[Window]:
    """The trace's windows in time order (of at most `window_rows` rows; default WINDOW_ROWS, read at each call);
    of one segment only, when one is given."""
    window_rows = window_rows or WINDOW_ROWS
    rows = segment.rows if segment is not None else {}
    families = {label: _Family(LAYOUTS[label], runs.get(label, []), rows.get(label)) for label in LAYOUTS}
    if segment is None:
        carried = {label: empty(LAYOUTS[label]) for label in LAYOUTS}
        ring = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        lo, stop = TIME_MIN, None
    else:
        carried, ring, lo, stop = segment.carried, segment.ring, segment.lo, segment.stop
    first = True
    while True:
        total = sum(f.remaining for f in families.values())
        if total == 0 and not first:
            return
        first = False
        cursors = sum(len(f.cursors) for f in families.values())
        bound = _bound(families, max(window_rows // max(cursors, 1), 1), window_rows) if total > window_rows else None
        if bound is not None and bound <= lo:
            bound = _one_instant(families, lo)
        last = bound is None
        if bound is None:
            cut, forced = (TIME_MAX if stop is None else stop), False
        else:
            cut, forced = _choose_cut(ctx, families, carried, lo, bound)
        final = last and stop is None
        fresh = {label: f.take_below(None if last else cut) for label, f in families.items()}
        tables = {label: _join(carried[label], fresh[label]) for label in LAYOUTS}
        window = Window(ctx, lo, cut, tables["gpu"], tables["runtime"], tables["cpu"], final, ring, forced)
        yield window
        if last:
            return
        carried = {label: _still_running(tables[label], cut) for label in LAYOUTS}
        ring = _next_ring(ring, window)
        lo = cut


def _one_instant(families: dict[str, _Family], lo: int) -> int:
    """More rows than a window start at one instant (`lo`): the next window takes all of them (a cut can only fall
    between two instants), up to MAX_SAME_INSTANT_ROWS, which no profiler writes; a file past it is refused."""
    at_once = sum(c.rows_below_at_most(lo + 1) for f in families.values() for c in f.cursors)
    if at_once > MAX_SAME_INSTANT_ROWS:
        raise InputError(
            f"more than {MAX_SAME_INSTANT_ROWS:,} trace events start at the same instant ({lo} ns): this is not a "
            "profiler's timeline"
        )
    return lo + 1


def _bound(families: dict[str, _Family], quota: int, window_rows: int) -> int | None:
    """A time below which at most `window_rows` rows are not yet taken, as late as the runs' sampled start times
    allow. Each run holding at most `window_rows / runs` of them is one such time, but a poor one when many runs
    (from many byte ranges, or spilled) lie in other stretches of the timeline: it is only the least."""
    bounds = [b for f in families.values() if (b := f.bound(quota)) is not None]
    if not bounds:
        return None
    cursors = [c for f in families.values() for c in f.cursors]
    times = distinct(np.concatenate([c.sampled_ts() for c in cursors]))
    times = times[times > min(bounds)]
    lo, hi = 0, len(times)  # the last time whose rows fit is times[lo - 1]
    while lo < hi:
        mid = (lo + hi) // 2
        if sum(c.rows_below_at_most(int(times[mid])) for c in cursors) <= window_rows:
            lo = mid + 1
        else:
            hi = mid
    return int(times[lo - 1]) if lo else min(bounds)


def _join(carried: Columns, fresh: Columns) -> Columns:
    if not length(carried):
        return fresh
    return concat([carried, fresh], {k: v.dtype for k, v in fresh.items()})


def _still_running(table: Columns, cut: int) -> Columns:
    open_rows = np.flatnonzero(table["end"] > cut)
    if len(open_rows) > MAX_CARRIED_ROWS:  # a hostile trace: keep the ones that run longest
        open_rows = np.sort(open_rows[np.argsort(-table["end"][open_rows], kind="stable")[:MAX_CARRIED_ROWS]])
    return take(table, open_rows)


def _next_ring(ring: tuple[I64, I64], window: Window) -> tuple[I64, I64]:
    new = window.runtime_new & (window.runtime["corr"] >= 0)
    corr = np.concatenate((ring[0], window.runtime["corr"][new]))[-RING_CALLS:]
    ts = np.concatenate((ring[1], window.runtime["ts"][new]))[-RING_CALLS:]
    return corr, ts


def _choose_cut(
    ctx: Context, families: dict[str, _Family], carried: dict[str, Columns], lo: int, bound: int
) -> tuple[int, bool]:
    """Where this window ends: at or below `bound`, preferably inside GPU-busy time and outside long CPU ops.

    Returns the cut and whether it had to be forced (no preferred instant in the window).
    """
    gpu = _peek(families["gpu"], carried["gpu"], bound)
    cpu = _peek(families["cpu"], carried["cpu"], bound)
    cut, quality = cut_within(ctx, gpu, cpu, lo, bound)
    return cut, quality == FORCED


CLEAN, INSIDE_OP, FORCED = 0, 1, 2  # how good a cut is, best first


def cut_within(ctx: Context, gpu: Columns, cpu: Columns, lo: int, bound: int) -> tuple[int, int]:
    """The best cut in (lo, bound] given every GPU row and CPU row that starts below bound and ends after lo, and
    how good it is: CLEAN (inside GPU-busy time and outside long CPU ops; without GPU rows, outside long ops),
    INSIDE_OP (GPU-busy, inside a long op; without GPU rows, any), or FORCED (in GPU idle time: bound itself)."""
    long_ops = (cpu["kind"] == CPU_OP) & ((ctx.bits[cpu["name"]] & N.CPU_COMPUTE) != 0)
    long_ops &= cpu["end"] - cpu["ts"] >= CPU_OP_MIN_NS
    ops = union(cpu["ts"][long_ops], cpu["end"][long_ops])
    floor = lo + 1
    if not ctx.gpu_rows:
        cut = _last_outside(ops, floor, bound)
        return (cut, CLEAN) if cut is not None else (bound, INSIDE_OP)
    busy = union(gpu["ts"], gpu["end"])
    for spans, quality in ((busy.minus(ops), CLEAN), (busy, INSIDE_OP)):
        cut = _last_inside(spans, floor, bound)
        if cut is not None:
            return cut, quality
    return bound, FORCED


def _peek(family: _Family, carried: Columns, bound: int) -> Columns:
    """Rows that start below `bound` (without taking them), with the carried ones."""
    parts = [carried]
    for cursor in family.cursors:
        rows = cursor.take_below(bound)
        cursor.buffer = concat([rows, cursor.buffer], family.layout) if length(rows) else cursor.buffer
        parts.append(rows)
    return concat([p for p in parts if length(p)], family.layout)


def _last_inside(spans: Spans, floor: int, bound: int) -> int | None:
    """The latest instant t in [floor, bound] strictly after the start of a span that covers up to t."""
    keep = (spans.start < bound) & (spans.end > floor)
    if not keep.any():
        return None
    start, end = int(spans.start[keep][-1]), int(spans.end[keep][-1])
    cut = min(end, bound)
    return cut if cut > max(start, floor - 1) else None


def _last_outside(spans: Spans, floor: int, bound: int) -> int | None:
    """The latest instant in [floor, bound] not strictly inside any span."""
    inside = (spans.start < bound) & (spans.end > bound)
    if not inside.any():
        return bound
    start = int(spans.start[inside][0])
    return start if start >= floor else None
