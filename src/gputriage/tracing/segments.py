"""Pass two over several processes: the timeline cut into stretches, each swept by its own process, merged in order.

The sweep (sweep.py) carries little from one window to the next: the rows still running at the cut, the recent
runtime calls (to find a kernel's launch) and a few per-stream and per-gap states. So a stretch of the timeline can
be swept on its own once that carried state is known at its start, and the accumulators of consecutive stretches
merge exactly (each accumulator's `merge`). Where the stretches meet is chosen like any window's cut, inside
GPU-busy time and outside long CPU ops, so no idle gap and no long op is cut in two: the merged numbers are those
of one sweep (tests/trace/test_segments.py compares every number on every corpus trace).

The calling process plans the cuts: from the runs' sampled start times it picks targets that share the rows out
evenly, reads only the start and end times of the rows before them (a chunk at a time) and keeps the rows around
each target and those still running there, to choose the cut and know what runs across it. Each worker then finds
its own recent runtime calls and sweeps its stretch; the processes, the calling one too, take the stretches as they
come (pool.py).

Workers are forked, and read the runs and the plan from this module (_JOB) as the fork left them: nothing large is
sent to them. Where forking is not safe (pool.can_fork), the sweep stays in one process.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

import msgspec
import numpy as np
import numpy.typing as npt

from gputriage.tracing import names as N
from gputriage.tracing.activity import MAX_GRAPH_LAUNCHES
from gputriage.tracing.distinct import distinct
from gputriage.tracing.pool import in_processes
from gputriage.tracing.store import INDEX_STRIDE, LAYOUTS, Columns, Run, concat, empty, sort_by_start, take
from gputriage.tracing.sweep import (
    CLEAN,
    MAX_CARRIED_ROWS,
    RING_CALLS,
    TIME_MIN,
    WINDOW_ROWS,
    Context,
    Segment,
    Window,
    cut_within,
    iterate_windows,
)

I64 = npt.NDArray[np.int64]

# Below this, one sweep (0.1 s) takes less time than planning cuts and forking. A stretch holds at least
# ROWS_PER_SEGMENT rows, and there are up to SEGMENTS_PER_WORKER per process: the processes take them one at a time
# (pool.py), so a slower one (a forked worker pays copy-on-write faults) takes fewer, and smaller windows stay in the
# caches. On a 900,000-row trace on 2 cores: one sweep 0.25 s, 2 stretches 0.20 s, 6 stretches 0.16 s.
SEGMENT_MIN_ROWS = 500_000
ROWS_PER_SEGMENT = 150_000
SEGMENTS_PER_WORKER = 3
_BAND_ROWS = WINDOW_ROWS // 2  # rows before each target, all targets together, among which a cut is chosen
_CHUNK_ROWS = 1 << 20  # rows read at once while planning (two int64 columns: 16 MiB)


class Sweeper(Protocol):
    def add(self, w: Window) -> None: ...

    def detach(self) -> None:
        """Called in a worker before the sweeper is sent back to the calling process."""


S = TypeVar("S", bound=Sweeper)


class _Job(msgspec.Struct):
    ctx: Context
    runs: dict[str, list[Run]]
    segments: list[Segment]
    new: Callable[[Segment], Sweeper]
    window_rows: int | None
    caller: int  # the process that planned the sweep: any other one is a forked worker


_JOB: list[_Job] = []  # what forked workers read: the one job running now (empty otherwise)


def segment_count(rows: int, workers: int) -> int:
    """How many stretches to sweep a timeline of `rows` rows in, with up to `workers` processes (1: one sweep)."""
    if workers < 2 or rows < SEGMENT_MIN_ROWS:
        return 1
    return max(1, min(workers * SEGMENTS_PER_WORKER, rows // ROWS_PER_SEGMENT))


def sweep_in_segments(
    ctx: Context,
    runs: dict[str, list[Run]],
    new: Callable[[Segment], S],
    *,
    count: int,
    workers: int,
    window_rows: int | None = None,
) -> list[S]:
    """Sweep the timeline in up to `count` stretches with up to `workers` processes; one sweeper per stretch, in
    time order (fewer stretches where no good cut was found near a target)."""
    segments = plan(ctx, runs, count)
    _JOB.append(_Job(ctx, runs, segments, new, window_rows, os.getpid()))
    try:
        return in_processes(_sweep_one, list(range(len(segments))), workers)  # type: ignore[arg-type]
    finally:
        _JOB.clear()


def _sweep_one(index: int) -> Sweeper:
    assert _JOB, "a segment's worker runs in a process forked by sweep_in_segments"
    job = _JOB[0]
    segment = job.segments[index]
    if index:
        runtime = job.runs["runtime"]
        segment = msgspec.structs.replace(
            segment,
            ring=ring_before(runtime, segment),
            graph_corr=graph_launches_before(job.ctx, runtime, segment),
        )
    sweeper = job.new(segment)
    for window in iterate_windows(job.ctx, job.runs, job.window_rows, segment):
        sweeper.add(window)
    if os.getpid() != job.caller:  # any stretch, the first one too: the processes take them as they come
        sweeper.detach()
    return sweeper


# ---- planning the cuts


class _Target(msgspec.Struct, frozen=True):
    lo: int  # the cut is chosen in (lo, at], among the rows that run there
    at: int


def plan(ctx: Context, runs: dict[str, list[Run]], count: int) -> list[Segment]:
    """The segments: cuts near `count - 1` targets that share the rows out evenly, each with what runs across it."""
    targets = _targets(runs, count)
    rows = _rows_near(runs, targets)
    cuts: list[tuple[int, dict[str, Columns]]] = []
    for k, target in enumerate(targets):
        found = _cut_at(ctx, runs, target, {label: per_run[k] for label, per_run in rows.items()})
        if found is not None and (not cuts or found[0] > cuts[-1][0]):
            cuts.append(found)
    starts = [TIME_MIN, *(cut for cut, _ in cuts)]
    carried = [{label: empty(layout) for label, layout in LAYOUTS.items()}, *(c for _, c in cuts)]
    bounds = {
        label: [[0, *(run.first_at_or_after(0, cut) for cut, _ in cuts), run.count] for run in runs.get(label, [])]
        for label in LAYOUTS
    }
    segments = []
    for k, lo in enumerate(starts):
        mine = {label: [(b[k], b[k + 1]) for b in per_run] for label, per_run in bounds.items()}
        stop = starts[k + 1] if k + 1 < len(starts) else None
        segments.append(Segment(lo, stop, mine, carried[k], (np.zeros(0, np.int64), np.zeros(0, np.int64))))
    return segments


def _targets(runs: dict[str, list[Run]], count: int) -> list[_Target]:
    samples = [r.sample_ts() for rs in runs.values() for r in rs if r.count]
    if count < 2 or not samples:
        return []
    ts = np.sort(np.concatenate(samples))
    band = max(_BAND_ROWS // (count - 1) // INDEX_STRIDE, 1)
    out = []
    for k in range(1, count):
        at = k * len(ts) // count
        lo = max(at - band, 0)
        if ts[at] > ts[lo]:
            out.append(_Target(int(ts[lo]), int(ts[at])))
    return out


def _rows_near(runs: dict[str, list[Run]], targets: list[_Target]) -> dict[str, list[list[Columns | None]]]:
    """Per layout, per target, per run: the rows that start before the target and end after its `lo` (None: too
    many to keep, as in a hostile trace where everything runs across the target). One read of the start and end
    times of the rows before the last target, a chunk at a time."""
    out: dict[str, list[list[Columns | None]]] = {label: [[] for _ in targets] for label in LAYOUTS}
    if not targets:
        return out
    cap = max(2 * WINDOW_ROWS // len(targets), MAX_CARRIED_ROWS)
    for label in LAYOUTS:
        for run in runs.get(label, []):
            found: list[list[npt.NDArray[np.intp]] | None] = [[] for _ in targets]
            for start, chunk in _chunks(run, run.first_at_or_after(0, targets[-1].at), ("ts", "end")):
                for k, rows in enumerate(_near_in_chunk(chunk["ts"], chunk["end"], targets)):
                    kept = found[k]
                    if kept is None:
                        continue
                    kept.append(rows + start)
                    if sum(len(r) for r in kept) > cap:
                        found[k] = None
            for k, kept in enumerate(found):
                out[label][k].append(None if kept is None else run.rows(np.concatenate([*kept, np.zeros(0, np.intp)])))
    return out


def _near_in_chunk(ts: I64, end: I64, targets: list[_Target]) -> list[npt.NDArray[np.intp]]:
    """Per target, the rows of a chunk (sorted by start) that start before `at` and end after `lo`: those that start
    in [lo, at), a slice, and the few that start before lo and run past it, found for all targets at once."""
    los = np.array([t.lo for t in targets], dtype=np.int64)
    # Row i runs across the lo of targets [first[i], past[i]) (the targets are in time order). The rows are sorted
    # by start, so the first lo after each row's start is a step function: one pass finds the few rows that run
    # past it, and only those are searched.
    before = np.searchsorted(ts, los, side="left")  # rows that start before each lo
    steps = np.diff(np.concatenate(([0], before, [len(ts)])))
    first_of = np.repeat(np.arange(len(los) + 1), steps)
    next_lo = np.append(los, np.iinfo(np.int64).max)[first_of]
    across = np.flatnonzero(end > next_lo)
    first = first_of[across]
    spans = np.searchsorted(los, end[across], side="left") - first
    rows = np.repeat(across, spans)
    which = np.repeat(first - np.cumsum(spans) + spans, spans) + np.arange(len(rows))
    out = []
    for k, target in enumerate(targets):
        a, b = np.searchsorted(ts, [target.lo, target.at], side="left")
        band = np.flatnonzero(end[a:b] > target.lo) + a
        out.append(np.concatenate((rows[which == k], band)))
    return out


def _cut_at(
    ctx: Context, runs: dict[str, list[Run]], target: _Target, near: dict[str, list[Columns | None]]
) -> tuple[int, dict[str, Columns]] | None:
    """The cut chosen near a target, and the rows of each layout still running there; None: no preferred cut."""
    tables: dict[str, Columns] = {}
    for label, per_run in near.items():
        if any(rows is None for rows in per_run):
            return None
        # Runs are in file order: a stable sort by start keeps the order one sweep gives rows that start together.
        tables[label] = sort_by_start(concat([r for r in per_run if r is not None], LAYOUTS[label]))
    cut, quality = cut_within(ctx, tables["gpu"], tables["cpu"], target.lo, target.at)
    if quality != CLEAN:  # a segment starts only where no idle gap and no long op runs across
        return None
    carried = {}
    for label, table in tables.items():
        running = np.flatnonzero((table["ts"] < cut) & (table["end"] > cut))
        if len(running) > MAX_CARRIED_ROWS:
            return None
        carried[label] = take(table, running)
    return cut, carried


def _chunks(run: Run, stop: int, columns: tuple[str, ...]) -> Iterator[tuple[int, Columns]]:
    for start in range(0, stop, _CHUNK_ROWS):
        yield start, run.read(start, min(start + _CHUNK_ROWS, stop), columns)


# ---- what a worker finds itself


def ring_before(runtime: list[Run], segment: Segment) -> tuple[I64, I64]:
    """The most recent runtime calls before the segment, as a sweep from the start would hold them: (corr, ts) of
    the last RING_CALLS calls with a correlation id, in time order."""
    corr, ts = np.zeros(0, np.int64), np.zeros(0, np.int64)
    for run, (before, _) in zip(runtime, segment.rows["runtime"], strict=True):
        tail_corr, tail_ts = _last_with_corr(run, before)
        corr, ts = np.concatenate((corr, tail_corr)), np.concatenate((ts, tail_ts))
        order = np.argsort(ts, kind="stable")[-RING_CALLS:]  # runs in file order: a stable sort keeps a sweep's order
        corr, ts = corr[order], ts[order]
    return corr, ts


def _last_with_corr(run: Run, stop: int) -> tuple[I64, I64]:
    """The last RING_CALLS rows before `stop` that have a correlation id (read backwards, a chunk at a time)."""
    corr: list[I64] = []
    ts: list[I64] = []
    have = 0
    end = stop
    while end > 0 and have < RING_CALLS:
        start = max(end - _CHUNK_ROWS, 0)
        chunk = run.read(start, end, ("ts", "corr"))
        keep = chunk["corr"] >= 0
        corr.insert(0, chunk["corr"][keep])
        ts.insert(0, chunk["ts"][keep])
        have += int(keep.sum())
        end = start
    if not corr:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(corr)[-RING_CALLS:], np.concatenate(ts)[-RING_CALLS:]


def graph_launches_before(ctx: Context, runtime: list[Run], segment: Segment) -> I64:
    """Correlation ids of the CUDA graph launches before the segment (sorted, unique)."""
    if not (ctx.bits & np.uint32(N.GRAPH_LAUNCH)).any():
        return np.zeros(0, np.int64)
    found: list[I64] = []
    for run, (before, _) in zip(runtime, segment.rows["runtime"], strict=True):
        for _, chunk in _chunks(run, before, ("name", "corr")):
            found.append(chunk["corr"][(ctx.bits[chunk["name"]] & np.uint32(N.GRAPH_LAUNCH)) != 0])
    return distinct(np.concatenate(found))[:MAX_GRAPH_LAUNCHES] if found else np.zeros(0, np.int64)
