"""One large plain-JSON trace read by several processes at once, each taking a byte range of the event list.

Kineto's default output (`tensorboard_trace_handler`) is plain JSON, and multi-GB ones are the slow case. The main
process reads the header, picks range boundaries and moves each one forward to the next proven event start; every
worker then collects its range into compact columns, and the columns are concatenated with their name and thread
ids renumbered. gzip files cannot be entered in the middle, so they are read by one process.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import numpy as np

from gputriage.tracing.collect import Collected, Collector, Table
from gputriage.tracing.pool import in_processes
from gputriage.tracing.reader import events_start, first_event_at, read_range, read_trace

# Below this size one process is as fast as starting several (a spawned worker costs ~0.3 s of imports).
SPLIT_MIN_BYTES = 96 << 20
_MIN_RANGE_BYTES = 32 << 20


def collect(path: Path, jobs: int | None = None) -> tuple[Collected, dict[str, Any]]:
    """Collect a trace's columns and top-level keys, with `jobs` processes where the file allows it."""
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    ranges = _plan(path, workers) if workers > 1 else None
    if ranges is None:
        header, batches = read_trace(path)
        collector = Collector()
        for batch in batches:
            collector.feed(batch)
        return collector.finish(), header.meta
    meta, bare, bounds = ranges
    jobs_ = [(path, start, stop, bare) for start, stop in bounds]
    parts = in_processes(_collect_range, jobs_, len(jobs_))
    for _, tail in parts:
        meta.update(tail)
    return merge([c for c, _ in parts]), meta


def _plan(path: Path, workers: int) -> tuple[dict[str, Any], bool, list[tuple[int, int | None]]] | None:
    start = events_start(path)
    span = start.size - start.offset
    if start.gzip or start.size < SPLIT_MIN_BYTES:
        return None
    count = max(1, min(workers, span // _MIN_RANGE_BYTES))
    if count < 2:
        return None
    cuts = [start.offset]
    for k in range(1, count):
        at = first_event_at(path, start.offset + k * span // count)
        if at is None:
            break
        if at > cuts[-1]:
            cuts.append(at)
    bounds: list[tuple[int, int | None]] = [(a, b) for a, b in itertools.pairwise(cuts)]
    bounds.append((cuts[-1], None))
    return start.header.meta, start.bare, bounds


def _collect_range(job: tuple[Path, int, int | None, bool]) -> tuple[Collected, dict[str, Any]]:
    path, start, stop, bare = job
    header, batches = read_range(path, start, stop, bare)
    collector = Collector()
    for batch in batches:
        collector.feed(batch)
    return collector.finish(), header.meta


def merge(parts: list[Collected]) -> Collected:
    """Concatenate collected columns, renumbering each part's name and thread ids into one table.

    Ids are renumbered in place and each column is concatenated and then dropped from the parts, so the peak is
    one copy of the columns plus one column, not two copies.
    """
    names: dict[str, int] = {}
    threads: dict[tuple[Any, Any], int] = {}
    stacks: dict[int, str] = {}
    cpu_rows = 0
    for part in parts:
        name_map = np.array([names.setdefault(n, len(names)) for n in part.names], dtype=np.int64)
        thread_map = np.array([threads.setdefault(t, len(threads)) for t in part.threads], dtype=np.int64)
        for table, lanes_are_threads in ((part.gpu, False), (part.runtime, True), (part.cpu, True)):
            if len(table):
                table.name = _writable(table.name)
                np.take(name_map, table.name, out=table.name)
                if lanes_are_threads:
                    table.lane = _writable(table.lane)
                    np.take(thread_map, table.lane, out=table.lane)
        stacks.update({row + cpu_rows: text for row, text in part.call_stacks.items()})
        cpu_rows += len(part.cpu)
    return Collected(
        names=list(names),
        threads=list(threads),
        gpu=_concat([p.gpu for p in parts]),
        runtime=_concat([p.runtime for p in parts]),
        cpu=_concat([p.cpu for p in parts]),
        call_stacks=stacks,
        events_total=sum(p.events_total for p in parts),
        events_dropped=sum(p.events_dropped for p in parts),
    )


def _writable(values: np.ndarray) -> np.ndarray:
    return values if values.flags.writeable else values.copy()


_COLUMNS = ("ts", "end", "name", "lane", "corr", "extra")


def _concat(tables: list[Table]) -> Table:
    merged: dict[str, np.ndarray] = {}
    for col in _COLUMNS:
        merged[col] = np.concatenate([getattr(t, col) for t in tables])
        for t in tables:
            setattr(t, col, merged[col][:0])  # drop the part's copy now
    return Table(**merged)
