"""Compact event rows, sorted by start time, in memory up to a budget and in temporary files beyond it.

Kineto does not write events in time order: a trace holds every CPU event of the window, then every GPU event, so
"time moving on" never happens in file order. The reader therefore keeps each kept event as a few machine words
(a row), sorts rows by start time in runs of bounded size, and spills each full run to a temporary file, like an
external sort. The timeline sweep (sweep.py) then merges the runs and analyses one window of time at a time, so
memory holds one run being filled plus one window, whatever the trace's size.

Temporary files go to one private folder (mode 0700) under the system's temporary directory ($TMPDIR), hold ~30
bytes per kept event, and are deleted when the analysis ends, also on an error.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

Columns = dict[str, np.ndarray]
Layout = dict[str, Any]  # column name -> numpy dtype

# The three row layouts. `name`, `lane` and `where` are ids into the collector's tables (renumbered on merge).
GPU_COLUMNS: Layout = {
    "ts": np.int64,
    "end": np.int64,
    "name": np.int32,
    "stream": np.int64,
    "corr": np.int64,
    "nbytes": np.int64,
}
RUNTIME_COLUMNS: Layout = {"ts": np.int64, "end": np.int64, "name": np.int32, "lane": np.int32, "corr": np.int64}
CPU_COLUMNS: Layout = {
    "ts": np.int64,
    "end": np.int64,
    "name": np.int32,
    "lane": np.int32,
    "kind": np.int8,
    "where": np.int32,
}
LAYOUTS: dict[str, Layout] = {"gpu": GPU_COLUMNS, "runtime": RUNTIME_COLUMNS, "cpu": CPU_COLUMNS}
ID_COLUMNS = {"name": "names", "lane": "lanes", "where": "wheres"}

# Rows kept in memory (all processes of one file together) before they are spilled: ~33 bytes each, ~33 MiB.
MEMORY_BUDGET_ROWS = 1_000_000
INDEX_STRIDE = 4096  # one start time per this many rows of a spilled run stays in memory, to seek in it


def empty(layout: Layout) -> Columns:
    return {name: np.zeros(0, dtype=dtype) for name, dtype in layout.items()}


def concat(parts: list[Columns], layout: Layout) -> Columns:
    if not parts:
        return empty(layout)
    if len(parts) == 1:
        return parts[0]
    return {name: np.concatenate([p[name] for p in parts]) for name in layout}


def take(cols: Columns, index: npt.NDArray[np.intp] | npt.NDArray[np.bool_]) -> Columns:
    return {name: values[index] for name, values in cols.items()}


def length(cols: Columns) -> int:
    return len(cols["ts"])


def sort_by_start(cols: Columns) -> Columns:
    order = np.argsort(cols["ts"], kind="stable")
    return take(cols, order)


# File numbers are counted per process, not per SpillDir: a worker process that collects two byte ranges opens the
# shared folder twice, and a count per object gave the second range's files the first one's names.
_FILE_NUMBERS = itertools.count(1)


_SPILL_PREFIX = "gputriage-trace-"


def _remove_stale_spills() -> None:
    """The spill folders of earlier runs that were killed (SIGKILL, OOM: no cleanup ran), named by a process that no
    longer exists and owned by this user: 130 MB each, never removed otherwise."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(tempfile.gettempdir()):
            pid_text = entry.name.removeprefix(_SPILL_PREFIX).split("-", 1)[0]
            if not entry.name.startswith(_SPILL_PREFIX) or not pid_text.isdigit():
                continue
            with contextlib.suppress(OSError):
                mine = entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.getuid()
                if mine and not _alive(int(pid_text)):
                    shutil.rmtree(entry.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    return True


class SpillDir:
    """One private temporary folder, created on first use and removed with everything in it."""

    def __init__(self, path: Path | None = None) -> None:
        self._path = path
        self._owned = path is None

    @property
    def path(self) -> Path:
        if self._path is None:
            _remove_stale_spills()
            self._path = Path(tempfile.mkdtemp(prefix=f"{_SPILL_PREFIX}{os.getpid()}-"))
        return self._path

    def ready(self) -> SpillDir:
        """This folder, created now if it was not yet (before processes fork, so that they share it)."""
        _ = self.path
        return self

    def new_file(self, stem: str) -> Path:
        return self.path / f"{stem}-{os.getpid()}-{next(_FILE_NUMBERS)}.rows"

    def cleanup(self) -> None:
        if self._owned and self._path is not None:
            shutil.rmtree(self._path, ignore_errors=True)
            self._path = None


class Run(msgspec.Struct):
    """Rows sorted by start time: in memory (`cols`), or in a file (one column after the other)."""

    layout: Layout
    count: int
    cols: Columns | None = None
    path: Path | None = None
    offsets: dict[str, int] = msgspec.field(default_factory=dict)
    index_ts: npt.NDArray[np.int64] | None = None  # ts of every INDEX_STRIDE-th row (file runs)
    maps: dict[str, npt.NDArray[np.int32]] = msgspec.field(default_factory=dict)  # id column -> renumbering

    def read(self, start: int, stop: int, columns: tuple[str, ...] | None = None) -> Columns:
        """Rows [start, stop) (of `columns`, or all), with their ids renumbered."""
        if self.cols is not None:
            out = {name: self.cols[name][start:stop] for name in columns or self.layout}
        else:
            out = self._read_file(start, stop, columns)
        return self._renumbered(out)

    def rows(self, index: npt.NDArray[np.intp]) -> Columns:
        """The rows at `index` (sorted row numbers), every column, ids renumbered."""
        if self.cols is not None:
            return self._renumbered({name: values[index] for name, values in self.cols.items()})
        if not len(index):
            return empty(self.layout)
        assert self.path is not None
        out: Columns = {}
        for name, dtype in self.layout.items():
            # A map of the file, not a read of it: only the pages that hold these rows are touched.
            column = np.memmap(self.path, dtype=dtype, mode="r", offset=self.offsets[name], shape=(self.count,))
            out[name] = np.array(column[index])
            del column
        return self._renumbered(out)

    def _renumbered(self, out: Columns) -> Columns:
        for column, mapping in self.maps.items():
            if column in out and len(mapping):
                out[column] = mapping[out[column]]
        return out

    def _read_file(self, start: int, stop: int, columns: tuple[str, ...] | None = None) -> Columns:
        assert self.path is not None
        out: Columns = {}
        with self.path.open("rb") as fh:
            for name in columns or self.layout:
                dtype = self.layout[name]
                size = np.dtype(dtype).itemsize
                fh.seek(self.offsets[name] + start * size)
                out[name] = np.fromfile(fh, dtype=dtype, count=stop - start)
        return out

    def ts_at(self, row: int) -> int:
        if self.cols is not None:
            return int(self.cols["ts"][row])
        return int(self._read_file(row, row + 1, ("ts",))["ts"][0])

    def rows_below_at_most(self, ts: int, start: int, stop: int) -> int:
        """How many of rows [start, stop) start before ts: exactly in memory, at most that many for a file run
        (from the sampled start times alone: no read)."""
        if self.cols is not None:
            return int(np.searchsorted(self.cols["ts"][start:stop], ts, side="left"))
        assert self.index_ts is not None
        first_late = int(np.searchsorted(self.index_ts, ts, side="left"))  # the sampled rows from here start later
        return max(min(first_late * INDEX_STRIDE, stop) - start, 0)

    def sample_ts(self) -> npt.NDArray[np.int64]:
        """The start time of every INDEX_STRIDE-th row: where the run's rows lie in time, for planning."""
        if self.cols is not None:
            return np.ascontiguousarray(self.cols["ts"][::INDEX_STRIDE])
        assert self.index_ts is not None
        return self.index_ts

    def first_at_or_after(self, start: int, ts: int) -> int:
        """The first row >= start whose start time is >= ts (rows are sorted by start time)."""
        if self.cols is not None:
            return start + int(np.searchsorted(self.cols["ts"][start:], ts, side="left"))
        assert self.index_ts is not None
        block = max(int(np.searchsorted(self.index_ts, ts, side="left")) - 1, start // INDEX_STRIDE)
        lo = max(block * INDEX_STRIDE, start)
        while lo < self.count:
            hi = min(lo + INDEX_STRIDE, self.count)
            chunk = self._read_file(lo, hi, ("ts",))["ts"]
            found = int(np.searchsorted(chunk, ts, side="left"))
            if found < len(chunk):
                return lo + found
            lo = hi
        return self.count

    def release(self) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()


def write_run(cols: Columns, layout: Layout, spill: SpillDir, stem: str) -> Run:
    """Sort rows by start time and write them as one run file."""
    cols = sort_by_start(cols)
    path = spill.new_file(stem)
    offsets: dict[str, int] = {}
    with path.open("wb") as fh:
        for name, dtype in layout.items():
            offsets[name] = fh.tell()
            np.ascontiguousarray(cols[name], dtype=dtype).tofile(fh)
    count = length(cols)
    index = np.ascontiguousarray(cols["ts"][::INDEX_STRIDE])
    return Run(layout, count, path=path, offsets=offsets, index_ts=index)


class RowStore(msgspec.Struct):
    """Rows of one layout: chunks in memory, flushed to sorted run files when the process's budget is spent."""

    layout: Layout
    chunks: list[Columns] = msgspec.field(default_factory=list)
    runs: list[Run] = msgspec.field(default_factory=list)
    in_memory: int = 0
    total: int = 0

    def append(self, cols: Columns) -> None:
        n = length(cols)
        if n:
            self.chunks.append(cols)
            self.in_memory += n
            self.total += n

    def spill(self, spill: SpillDir, stem: str) -> None:
        if self.chunks:
            self.runs.append(write_run(concat(self.chunks, self.layout), self.layout, spill, stem))
            self.chunks = []
            self.in_memory = 0

    def finish(self) -> list[Run]:
        """All rows as sorted runs, in file order (the last one in memory)."""
        runs = list(self.runs)
        if self.chunks:
            cols = sort_by_start(concat(self.chunks, self.layout))
            runs.append(Run(self.layout, length(cols), cols=cols))
            self.chunks = []
            self.in_memory = 0
        return runs


class RunCursor:
    """Reads rows [start, stop) of one run forward in time; rows read but not yet taken stay in a small buffer."""

    def __init__(self, run: Run, start: int = 0, stop: int | None = None) -> None:
        self.run = run
        self.position = start  # rows read from the run so far
        self.stop = run.count if stop is None else stop
        self.buffer: Columns = empty(run.layout)

    @property
    def remaining(self) -> int:
        return self.stop - self.position + length(self.buffer)

    def peek_ts(self, rows: int) -> int | None:
        """The start time of the `rows`-th row not yet taken (1-based), or None when fewer remain."""
        buffered = length(self.buffer)
        if rows <= buffered:
            return int(self.buffer["ts"][rows - 1])
        row = self.position + rows - buffered - 1
        return self.run.ts_at(row) if row < self.stop else None

    def rows_below_at_most(self, ts: int) -> int:
        """At most how many rows not yet taken start before ts (read nothing)."""
        buffered = int(np.searchsorted(self.buffer["ts"], ts, side="left"))
        if self.position >= self.stop:
            return buffered
        return buffered + self.run.rows_below_at_most(ts, self.position, self.stop)

    def sampled_ts(self) -> npt.NDArray[np.int64]:
        """Start times of some rows not yet taken (every INDEX_STRIDE-th of the run's): where a bound may fall."""
        if self.position >= self.stop:
            return self.buffer["ts"][-1:]
        samples = self.run.sample_ts()
        return samples[self.position // INDEX_STRIDE : self.stop // INDEX_STRIDE + 1]

    def take_below(self, ts: int | None) -> Columns:
        """Every row not yet taken whose start time is below ts (all of them for None)."""
        stop = self.stop if ts is None else min(self.run.first_at_or_after(self.position, ts), self.stop)
        fresh = self.run.read(self.position, stop) if stop > self.position else empty(self.run.layout)
        self.position = max(stop, self.position)
        rows = concat([self.buffer, fresh], self.run.layout) if length(self.buffer) else fresh
        if ts is None:
            self.buffer = empty(self.run.layout)
            return rows
        cut = int(np.searchsorted(rows["ts"], ts, side="left"))
        self.buffer = {name: values[cut:] for name, values in rows.items()}
        return {name: values[:cut] for name, values in rows.items()}


def iter_chunks(cols: Columns, size: int) -> Iterator[Columns]:
    for start in range(0, length(cols), size):
        yield {name: values[start : start + size] for name, values in cols.items()}
