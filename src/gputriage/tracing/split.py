"""Pass one over one trace file, by one process or by several, each reading a byte range of the event list.

Kineto's default output (`tensorboard_trace_handler`) is plain JSON, and multi-GB ones are the slow case. The main
process reads the header, picks range boundaries and moves each one forward to the next proven event start; the
processes collect the ranges as they come (rows in runs, and a few statistics), and the parts are merged in file
order with their name, thread and line ids renumbered. The rows themselves are not copied: a part's runs are read
later with its renumbering. gzip files cannot be entered in the middle, so they are read by one process.

`begin()` forks the workers and lets them start before the caller has imported what it needs afterwards (`trace`:
the analysis, the rules and the report); `collect(..., begun)` joins in and finishes.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from gputriage import cyclegc
from gputriage.errors import InputError
from gputriage.stdlib import statistics
from gputriage.tracing.collect import Collected, Collector, LaneStats, TooManyEvents, add_device_time
from gputriage.tracing.distinct import distinct
from gputriage.tracing.limits import TraceLimits
from gputriage.tracing.pool import Started, can_fork, in_processes, start, workers_for
from gputriage.tracing.reader import TraceHeader, events_start, first_event_at, read_range, read_trace
from gputriage.tracing.store import MEMORY_BUDGET_ROWS, Run, SpillDir

# Below this size one process is as fast as starting several.
SPLIT_MIN_BYTES = 48 << 20
_MIN_RANGE_BYTES = 16 << 20
# Ranges per process: the processes take them one at a time (pool.py), so one that is slower takes fewer. More ranges
# balance better and cost a cut, a header and a few sorted runs each.
_RANGES_PER_WORKER = 2
_MIN_WORKER_BUDGET = 64_000


class Begun(msgspec.Struct):
    """Pass one over a large plain-JSON file, started in forked workers (begin()); collect() finishes it."""

    path: Path
    spill: SpillDir
    header: TraceHeader
    started: Started[_Range, tuple[Collected, TraceHeader]]

    def abandon(self) -> None:
        self.started.abandon()


def begin(path: Path, limits: TraceLimits, spill: SpillDir, jobs: int | None = None) -> Begun | None:
    """Start pass one in forked workers now, where the file is split at all: the caller goes on with other work
    (`trace` imports the analysis, the rules and the report meanwhile) and hands the result to collect(). None when
    the file is read otherwise, or cannot be planned (collect() then reads it, and says what is wrong with it)."""
    workers = workers_for(jobs)
    if workers < 2 or not can_fork():
        return None  # before the spill folder exists: nothing to clean up
    try:
        planned = _plan(path, workers, limits)
    except InputError:
        return None
    if planned is None:
        return None
    header, work = _work(path, planned, limits, spill)
    started = start(_collect_range, work, workers)
    if started is None:
        spill.cleanup()
        return None
    return Begun(path, spill, header, started)


def collect(
    path: Path, limits: TraceLimits, spill: SpillDir, jobs: int | None = None, begun: Begun | None = None
) -> tuple[Collected, TraceHeader]:
    """Collect a trace's rows and statistics, with `jobs` processes where the file allows it (or finish what
    begin() started)."""
    # Pass one allocates millions of short-lived objects and no cycle: the collector would scan them again and again
    # (a third of the decoding time).
    with cyclegc.paused():
        if begun is not None and begun.path == path:
            return _gather(path, limits, spill, jobs, header=begun.header, run=begun.started.finish)
        return _collect(path, limits, spill, jobs)


def _collect(path: Path, limits: TraceLimits, spill: SpillDir, jobs: int | None) -> tuple[Collected, TraceHeader]:
    workers = workers_for(jobs)
    planned = _plan(path, workers, limits) if workers > 1 else None
    if planned is None:
        reading = read_trace(path, limits)
        collector = Collector(limits, spill)
        try:
            for batch in reading.batches:
                collector.feed(batch)
        except TooManyEvents:
            raise InputError(_too_many_events(path, limits)) from None
        return collector.finish(), reading.header
    header, work = _work(path, planned, limits, spill)
    return _gather(path, limits, spill, jobs, header=header, run=lambda: in_processes(_collect_range, work, workers))


def _work(
    path: Path, planned: tuple[TraceHeader, bool, list[tuple[int, int | None]]], limits: TraceLimits, spill: SpillDir
) -> tuple[TraceHeader, list[_Range]]:
    header, bare, bounds = planned
    budget = max(MEMORY_BUDGET_ROWS // len(bounds), _MIN_WORKER_BUDGET)
    reference = sampled_time(path, [at for at, _ in bounds])
    return header, [_Range(path, start, stop, bare, limits, spill.path, budget, reference) for start, stop in bounds]


_MIN_SAMPLES = 3  # range starts with a readable "ts" for the trace's reference time
_SAMPLE_BYTES = 4096  # read at each: Kineto writes "ts" before "args", near an event's start
_TS = re.compile(rb'"ts"\s*:\s*"?(-?[0-9]{1,20}(?:\.[0-9]{1,9})?)')


def sampled_time(path: Path, starts: list[int]) -> int | None:
    """The trace's time, in ns: the median start of the events that begin the byte ranges (proved event starts, found
    by the plan: a few small reads, no decoding). Every range checks its batches against it: a range alone cannot tell
    a stray from the rest (one kernel at ts 5 alone in a range, fifty side by side at a range's start)."""
    samples = []
    with path.open("rb") as fh:
        for at in starts:
            fh.seek(at)
            match = _TS.search(fh.read(_SAMPLE_BYTES))
            if match is not None:
                samples.append(float(match.group(1)))
    if len(samples) < _MIN_SAMPLES:
        return None  # each range judges its batches by the batches it has read (Collector._far_from_the_rest)
    return round(statistics.median(samples) * 1000)  # Kineto's µs


def _gather(
    path: Path,
    limits: TraceLimits,
    spill: SpillDir,
    jobs: int | None,
    *,
    header: TraceHeader,
    run: Callable[[], list[tuple[Collected, TraceHeader]]],
) -> tuple[Collected, TraceHeader]:
    """The byte ranges' parts (from `run`) merged into one; the whole file by one process where a range went wrong."""
    try:
        parts = run()
    except TooManyEvents:  # one range alone holds too many: the whole file does too
        raise InputError(_too_many_events(path, limits)) from None
    except InputError:
        # A cut fell after the end of the events (a large key after traceEvents: stackFrames, a blob), so a range
        # held the list's end and what follows. The byte ranges are a guess; one process reads the file exactly, and
        # says what is really wrong with it, if anything is.
        return _collect(path, limits, spill, jobs=1)
    for _, tail in parts:
        header.fill_from(tail)
    merged = merge([c for c, _ in parts])
    if merged.events > limits.max_events:
        raise InputError(_too_many_events(path, limits))
    return merged, header


def _too_many_events(path: Path, limits: TraceLimits) -> str:
    return f"{path} holds more than {limits.max_events:,} events, the limit for one trace (raise it with --max-events)"


def _plan(
    path: Path, workers: int, limits: TraceLimits
) -> tuple[TraceHeader, bool, list[tuple[int, int | None]]] | None:
    start = events_start(path, limits)
    span = start.size - start.offset
    if start.gzip or start.size < SPLIT_MIN_BYTES:
        return None
    count = max(1, min(workers * _RANGES_PER_WORKER, span // _MIN_RANGE_BYTES))
    if count < 2:
        return None
    cuts = [start.offset]
    for k in range(1, count):
        at = first_event_at(path, start.offset + k * span // count, limits)
        if at is not None and at > cuts[-1]:
            cuts.append(at)
    if len(cuts) < 2:
        return None
    bounds: list[tuple[int, int | None]] = list(itertools.pairwise(cuts))
    bounds.append((cuts[-1], None))
    return start.header, start.bare, bounds


class _Range(msgspec.Struct):
    path: Path
    start: int
    stop: int | None
    bare: bool
    limits: TraceLimits
    spill_path: Path
    budget_rows: int
    reference_ns: int | None = None


def _collect_range(job: _Range) -> tuple[Collected, TraceHeader]:
    with cyclegc.paused():
        return _collect_one_range(job)


def _collect_one_range(job: _Range) -> tuple[Collected, TraceHeader]:
    reading = read_range(job.path, job.start, job.stop, job.bare, job.limits)
    collector = Collector(job.limits, SpillDir(job.spill_path), job.budget_rows, reference_ns=job.reference_ns)
    for batch in reading.batches:
        collector.feed(batch)
    return collector.finish(), reading.header


def _renumber(keys: list[Any], table: dict[Any, int]) -> npt.NDArray[np.int32]:
    return np.array([table.setdefault(k, len(table)) for k in keys], dtype=np.int32)


def merge(parts: list[Collected]) -> Collected:
    """One Collected from the parts of one file (in file order), ids renumbered, runs kept as they are."""
    if len(parts) == 1:
        return parts[0]
    names: dict[tuple[str, int], int] = {}
    wheres: dict[str, int] = {}
    lanes: dict[tuple[Any, Any], int] = {}
    stats = LaneStats()
    runs: dict[str, list[Run]] = {"gpu": [], "runtime": [], "cpu": []}
    dropped: Counter[str] = Counter()
    for part in parts:
        name_map = _renumber(list(zip(part.names, part.name_bits, strict=True)), names)
        lane_map = _renumber(part.lanes, lanes)
        where_map = np.append(_renumber(part.wheres, wheres), np.int32(-1))  # -1 (no line) stays -1
        for kind in ("cpu", "steps", "loader", "runtime"):
            counts = getattr(part.lane_stats, kind)
            if len(counts):
                stats.add_counts(kind, lane_map[: len(counts)], counts)
        maps = {"gpu": {"name": name_map}, "runtime": {"name": name_map, "lane": lane_map}}
        maps["cpu"] = {"name": name_map, "lane": lane_map, "where": where_map}
        for label, part_runs in part.runs.items():
            for run in part_runs:
                run.maps = maps[label]
                runs[label].append(run)
        dropped.update(part.dropped)
    firsts = [p.gpu_first_ts for p in parts if p.gpu_first_ts is not None]
    lasts = [p.gpu_last_end for p in parts if p.gpu_last_end is not None]
    ops = [p.first_op_ts for p in parts if p.first_op_ts is not None]
    return Collected(
        names=[text for text, _ in names],
        name_bits=[bits for _, bits in names],
        wheres=list(wheres),
        lanes=list(lanes),
        lane_stats=stats,
        runs=runs,
        events=sum(p.events for p in parts),
        dropped=dropped,
        d2h_corr=distinct(np.concatenate([p.d2h_corr for p in parts])),
        gpu_rows=sum(p.gpu_rows for p in parts),
        gpu_first_ts=min(firsts) if firsts else None,
        gpu_last_end=max(lasts) if lasts else None,
        first_op_ts=min(ops) if ops else None,
        names_overflowed=sum(p.names_overflowed for p in parts),
        lanes_overflowed=sum(p.lanes_overflowed for p in parts),
        unread_events=sum(p.unread_events for p in parts),
        device_time=_device_time(parts),
    )


def _device_time(parts: list[Collected]) -> dict[str, list[int]]:
    table: dict[str, list[int]] = {}
    for part in parts:
        for key, (events, dur_ns) in part.device_time.items():
            add_device_time(table, key, events, dur_ns)
    return table
