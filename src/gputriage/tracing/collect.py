"""Pass one over the events: validate each batch as columns, keep compact rows, and count what the sweep needs.

Every field goes through one typed, range-checked boundary here: times become exact int64 nanoseconds or the
event is dropped with its reason ("ts out of range", "dur is not a number", "ts + dur out of range"); a name or
category that is not a string drops the event; ids that do not fit int64 become -1. Python frames that are not the
user's own code are dropped at once (they are most events of a with_stack trace).

Besides the rows, a few statistics are counted here because the sweep needs them before it starts: which thread
runs the training loop, when the GPU window starts and ends, which correlation ids are device-to-host copies.
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from gputriage.errors import InputError
from gputriage.tracing import names as N
from gputriage.tracing.decode import Families
from gputriage.tracing.distinct import distinct
from gputriage.tracing.families import ANNOTATION, CPU_OP, DEVICE, PYTHON, RUNTIME
from gputriage.tracing.limits import MAX_LANES, TraceLimits
from gputriage.tracing.numbers import I64_MAX, MISSING, NOT_A_NUMBER, OK, int_column, us_to_ns
from gputriage.tracing.scan import Scanned, by_first_appearance
from gputriage.tracing.store import (
    CPU_COLUMNS,
    GPU_COLUMNS,
    MEMORY_BUDGET_ROWS,
    RUNTIME_COLUMNS,
    Columns,
    RowStore,
    Run,
    SpillDir,
)

I64 = npt.NDArray[np.int64]
_D2H_KEEP = 1 << 20  # device-to-host copies whose correlation ids are kept (each a few per step in real traces)
_WHERE_CACHE = 65_536
_CODE_WORDS = {MISSING: "missing", NOT_A_NUMBER: "not a number"}
_MAX_SPREAD_NS = 86_400 * 10**9  # a day: no profiler window is longer
_REFERENCE_TOTAL = 256  # timed events the trace's time is first read from (strays among them are a minority)
_MAX_WAITING = 4096  # batches held until the trace's time is known; past this, checked as they come
_MAX_MEDIANS = 1024  # batch medians kept for the trace's time (see _far_from_the_rest)
OTHER_THREADS = ("<other threads>", "")
_TS, _DUR, _NAME = operator.attrgetter("ts"), operator.attrgetter("dur"), operator.attrgetter("name")
_PID, _TID, _ARGS = operator.attrgetter("pid"), operator.attrgetter("tid"), operator.attrgetter("args")


class TooManyEvents(InputError):
    """More events than --max-events allows (split.py names the file in the message it shows)."""


class LaneStats(msgspec.Struct):
    """Per-thread counts that choose the main thread (see sweep.main_lane)."""

    cpu: I64 = msgspec.field(default_factory=lambda: np.zeros(0, np.int64))
    steps: I64 = msgspec.field(default_factory=lambda: np.zeros(0, np.int64))
    loader: I64 = msgspec.field(default_factory=lambda: np.zeros(0, np.int64))
    runtime: I64 = msgspec.field(default_factory=lambda: np.zeros(0, np.int64))

    def add(self, kind: str, lanes: npt.NDArray[np.int32]) -> None:
        if len(lanes):
            counts = np.bincount(lanes)
            self.add_counts(kind, np.arange(len(counts)), counts)

    def add_counts(self, kind: str, lanes: npt.NDArray[Any], counts: I64) -> None:
        current = getattr(self, kind)
        size = max(len(current), int(lanes.max()) + 1 if len(lanes) else 0)
        merged = np.zeros(size, np.int64)
        merged[: len(current)] += current
        np.add.at(merged, lanes, counts)
        setattr(self, kind, merged)


class Collected(msgspec.Struct):
    """What pass one keeps from one file (or one byte range of it): tables, statistics and sorted runs."""

    names: list[str]
    name_bits: list[int]
    wheres: list[str]
    lanes: list[tuple[Any, Any]]
    lane_stats: LaneStats
    runs: dict[str, list[Run]]
    events: int
    dropped: Counter[str]
    d2h_corr: I64
    gpu_rows: int
    gpu_first_ts: int | None
    gpu_last_end: int | None
    first_op_ts: int | None  # the earliest CPU op, annotation or runtime call: when the profiler started recording
    names_overflowed: int = 0
    lanes_overflowed: int = 0
    # Timed events of a category no family reads (or of none), without a stream: not device work as Kineto writes it
    # for CUDA, ROCm and MTIA (its own "overhead" bookkeeping is skipped by category); thousands, in a trace with no
    # kernel, are a device's work in a form gputriage does not read (torch_npu's Ascend tasks: no category, no stream).
    unread_events: int = 0
    # Per device (the device events' pid, as text): [events, summed duration in ns], at most MAX_DEVICES of them. One
    # process may drive several GPUs (device_map="auto"); the busy share pools them (see DeviceTime).
    device_time: dict[str, list[int]] = msgspec.field(default_factory=dict)


MAX_DEVICES = 64  # devices told apart in one trace; more are counted together under OTHER_DEVICES
OTHER_DEVICES = "other"


def add_device_time(table: dict[str, list[int]], key: str, events: int, dur_ns: int) -> None:
    """Count `events` of `dur_ns` on device `key`, the table bounded (see Collected.device_time)."""
    if key not in table and len(table) >= MAX_DEVICES:
        key = OTHER_DEVICES
    counts = table.setdefault(key, [0, 0])
    counts[0] += events
    counts[1] += dur_ns


class _Rows(msgspec.Struct):
    """One batch's kept events as columns, family by family in file order, before their times are checked.

    The per-family columns line up with that family's rows: stream, device_corr and nbytes with the device rows;
    lane with the other rows; runtime_corr with the runtime rows; where with the CPU rows (None: no call stacks).
    """

    kinds: npt.NDArray[np.int8]
    name: npt.NDArray[np.int32]
    name_ok: npt.NDArray[np.bool_]
    ts: I64
    ts_code: npt.NDArray[np.int8]
    dur: I64
    dur_code: npt.NDArray[np.int8]
    stream: I64 = msgspec.field(default_factory=lambda: np.zeros(0, np.int64))
    device_corr: I64 = msgspec.field(default_factory=lambda: np.zeros(0, np.int64))
    nbytes: I64 = msgspec.field(default_factory=lambda: np.zeros(0, np.int64))
    device_pid: Any = None  # the device rows' pids: an int64 column, or a list of what the file holds
    lane: npt.NDArray[np.int32] = msgspec.field(default_factory=lambda: np.zeros(0, np.int32))
    runtime_corr: I64 = msgspec.field(default_factory=lambda: np.zeros(0, np.int64))
    where: npt.NDArray[np.int32] | None = None


class Collector:
    """Feed decoded batches; `finish()` returns the Collected rows and statistics."""

    def __init__(
        self, limits: TraceLimits, spill: SpillDir, budget_rows: int | None = None, *, reference_ns: int | None = None
    ) -> None:
        self.limits = limits
        self.spill = spill
        self.budget_rows = budget_rows if budget_rows is not None else MEMORY_BUDGET_ROWS
        self.names = N.NameTable()
        self._bits = np.zeros(0, dtype=np.uint32)
        self._lanes: dict[tuple[Any, Any], int] = {}
        self._lane_keys: list[tuple[Any, Any]] = []
        self.lanes_overflowed = 0
        self._wheres: dict[str, int] = {}
        self._where_of_stack: dict[str, int] = {}
        self.stores = {"gpu": RowStore(GPU_COLUMNS), "runtime": RowStore(RUNTIME_COLUMNS), "cpu": RowStore(CPU_COLUMNS)}
        self.lane_stats = LaneStats()
        self.events = 0
        self.unread_events = 0
        self.dropped: Counter[str] = Counter()
        self._d2h: list[I64] = []
        self._d2h_count = 0
        self.gpu_first: int | None = None
        self.gpu_last: int | None = None
        self.first_op: int | None = None
        self.device_time: dict[str, list[int]] = {}
        # The batches' median starts and sizes so far (see _far_from_the_rest): the trace's time every batch is
        # checked against, where no byte-range reference is given; the first batches wait for _REFERENCE_TOTAL events
        self._medians: list[tuple[int, int]] = []
        self._timed = 0  # timed events read so far
        self._waiting: list[_Rows] = []
        # The trace's time read by the process that split the file into byte ranges, from the ranges' first events
        # (split.sampled_time): what every batch of a range is checked against (a range may hold a stray alone)
        self._reference_ns = reference_ns

    # ---- tables

    def bits_of(self, name_ids: npt.NDArray[np.int32]) -> npt.NDArray[np.uint32]:
        if len(self._bits) < len(self.names.bits):
            self._bits = self.names.bit_array()
        out: npt.NDArray[np.uint32] = self._bits[name_ids]
        return out

    def _lane_ids(self, pids: list[Any], tids: list[Any]) -> npt.NDArray[np.int32]:
        if set(map(type, pids)) == {int} and set(map(type, tids)) == {int}:
            try:
                pid, tid = np.array(pids, dtype=np.int64), np.array(tids, dtype=np.int64)
            except OverflowError:
                pass
            else:
                return self._int_lane_ids(pid, tid)
        get = self._lanes.get
        keys = list(zip(pids, tids, strict=True))
        try:
            found = list(map(get, keys))
        except TypeError:  # a list or an object as pid/tid
            keys = [(_hashable(p), _hashable(t)) for p, t in keys]
            found = list(map(get, keys))
        if None in found:
            found = [f if f is not None else self._new_lane(k) for f, k in zip(found, keys, strict=True)]
        return np.array(found, dtype=np.int32)

    def _int_lane_ids(self, pid: I64, tid: I64) -> npt.NDArray[np.int32]:
        """The common case, integer pids and tids: one dict lookup per distinct thread, not per event."""
        if (pid == pid[0]).all() and (tid == tid[0]).all():  # one thread in the whole batch: the usual case
            return np.full(len(pid), self._lane_of((int(pid[0]), int(tid[0]))), dtype=np.int32)
        unique, inverse = np.unique(np.column_stack((pid, tid)), axis=0, return_inverse=True)
        ids = [self._lane_of((int(p), int(t))) for p, t in unique.tolist()]
        return np.array(ids, dtype=np.int32)[inverse.reshape(-1)]

    def _lane_of(self, key: tuple[Any, Any]) -> int:
        found = self._lanes.get(key)
        return found if found is not None else self._new_lane(key)

    def _new_lane(self, key: tuple[Any, Any]) -> int:
        found = self._lanes.get(key)
        if found is not None:
            return found
        if len(self._lane_keys) >= MAX_LANES:
            self.lanes_overflowed += 1
            key = OTHER_THREADS
            found = self._lanes.get(key)
            if found is not None:
                return found
        ident = self._lanes[key] = len(self._lane_keys)
        self._lane_keys.append(key)
        return ident

    def _where_id(self, stack: Any) -> int:
        """'Call stack' text -> the id of its innermost user frame ("train.py:42"), -1 when none."""
        if type(stack) is not str or not stack:
            return -1
        found = self._where_of_stack.get(stack)
        if found is None:
            found = -1
            for frame in stack[:65_536].split(";"):
                located = N.user_frame(frame.strip())
                if located is not None:
                    found = self._wheres.setdefault(located, len(self._wheres))
                    break
            if len(self._where_of_stack) < _WHERE_CACHE:
                self._where_of_stack[stack] = found
        return found

    # ---- one batch

    def feed(self, batch: Families) -> None:
        self.events += batch.events
        self.dropped.update(batch.dropped)
        if self.events > self.limits.max_events:
            raise TooManyEvents(
                f"the trace holds more than {self.limits.max_events:,} events, the limit for one trace "
                "(raise it with --max-events)"
            )
        if batch.scanned is not None:
            self.unread_events += batch.scanned.unread
            self._feed_scanned(batch.scanned)
        else:
            device, device_args = _with_stream(batch.device)
            self.unread_events += len(batch.device) - len(device)
            groups: list[tuple[int, list[Any]]] = [(DEVICE, device), (RUNTIME, batch.runtime)]
            groups += [(kind, events) for kind, events in batch.cpu.items()]
            groups = [(kind, events) for kind, events in groups if events]
            if groups:
                self._feed_groups(groups, device_args, batch.stacks, [_PID(e) for e in device])
        if sum(s.in_memory for s in self.stores.values()) > self.budget_rows:
            for label, store in self.stores.items():
                store.spill(self.spill, label)

    def _feed_groups(
        self, groups: list[tuple[int, list[Any]]], device_args: list[Any], stacks: bool, device_pids: list[Any]
    ) -> None:
        """All families of one decoded batch at once: one call per column kind, so numpy's per-call cost is paid
        once. Builds the columns that _add_rows checks and stores."""
        events = list(itertools.chain.from_iterable(e for _, e in groups))
        kinds = np.repeat(np.array([k for k, _ in groups], dtype=np.int8), [len(e) for _, e in groups])
        name, name_ok = self._name_ids(events)
        # with_stack traces hold a frame event per Python call; only the user's own frames can say where, so
        # library frames are dropped before any other work (they are most of the events).
        library = self._library_frames(kinds, name)
        if library is not None:
            index = np.flatnonzero(~library)
            events = [events[i] for i in index.tolist()]
            name, name_ok, kinds = name[index], name_ok[index], kinds[index]
        ts, ts_code = us_to_ns(list(map(_TS, events)))
        dur, dur_code = us_to_ns(list(map(_DUR, events)))
        rows = _Rows(kinds, name, name_ok, ts, ts_code, dur, dur_code)
        if device_args:
            rows.stream = int_column([a.stream for a in device_args])
            rows.device_corr = int_column([a.correlation for a in device_args])
            rows.nbytes = int_column([a.nbytes for a in device_args])
            rows.device_pid = device_pids
        threaded = np.flatnonzero(kinds != DEVICE)
        if len(threaded):
            subset = events if len(threaded) == len(events) else [events[i] for i in threaded.tolist()]
            rows.lane = self._lane_ids(list(map(_PID, subset)), list(map(_TID, subset)))
            runtime = kinds[threaded] == RUNTIME
            if runtime.any():
                rt_events = [subset[i] for i in np.flatnonzero(runtime).tolist()]
                rows.runtime_corr = int_column([None if a is None else a.correlation for a in map(_ARGS, rt_events)])
            cpu = ~runtime
            if cpu.any() and stacks:
                cpu_events = subset if cpu.all() else [subset[i] for i in np.flatnonzero(cpu).tolist()]
                rows.where = self._wheres_of(cpu_events, kinds[threaded][cpu])
        self._add_rows(rows)

    def _feed_scanned(self, batch: Scanned) -> None:
        """A batch from the compiled scanner: already columns, with plain-integer ids and exact times."""
        if not len(batch.kinds):
            return
        ids = self.names.intern_column(batch.names)
        name = ids[batch.name_index]
        kinds = batch.kinds
        keep = np.arange(len(kinds))
        library = self._library_frames(kinds, name)
        if library is not None:
            keep = np.flatnonzero(~library)
            kinds, name = kinds[keep], name[keep]
        valid = np.zeros(len(keep), dtype=np.int8)  # the scanner takes only times that parse (code OK)
        rows = _Rows(kinds, name, np.ones(len(keep), dtype=bool), batch.ts[keep], valid, batch.dur[keep], valid)
        device = kinds == DEVICE
        if device.any():
            on_device = keep[device]
            rows.stream, rows.device_corr = batch.stream[on_device], batch.corr[on_device]
            rows.nbytes = batch.nbytes[on_device]
            rows.device_pid = (
                batch.pid[on_device] if isinstance(batch.pid, np.ndarray) else _values_at(batch.pid, on_device)
            )
        threaded = keep[~device]
        if len(threaded):
            pid, tid = batch.pid, batch.tid
            if isinstance(pid, np.ndarray) and isinstance(tid, np.ndarray):
                rows.lane = self._int_lane_ids(pid[threaded], tid[threaded])
            else:  # a string or missing thread id somewhere (older traces): keyed as the Python path keys them
                rows.lane = self._lane_ids(_values_at(pid, threaded), _values_at(tid, threaded))
            rows.runtime_corr = batch.corr[threaded[kinds[~device] == RUNTIME]]
            if batch.stack is not None:
                cpu = kinds[~device] != RUNTIME
                rows.where = self._wheres_of_texts(batch.stack[threaded[cpu]], kinds[~device][cpu], batch.texts)
        self._add_rows(rows)

    def _wheres_of_texts(self, stacks: I64, kinds: npt.NDArray[np.int8], texts: list[str]) -> npt.NDArray[np.int32]:
        """The line of each CPU row from its call stack's index into `texts` (-1: none), as _wheres_of finds it:
        each distinct stack is read once, in order of first appearance, so the lines get the same ids."""
        used, index = by_first_appearance(stacks)
        lines = np.array([self._where_id(texts[i]) if i >= 0 else -1 for i in used], dtype=np.int32)
        return _ops_only(lines[index], kinds)

    def _library_frames(self, kinds: npt.NDArray[np.int8], name: npt.NDArray[np.int32]) -> npt.NDArray[np.bool_] | None:
        """The Python frames that are a library's, not the user's; None when there are none."""
        library = (kinds == PYTHON) & ((self.bits_of(name) & N.USER_FRAME) == 0)
        return library if library.any() else None

    def _add_rows(self, rows: _Rows) -> None:
        """Check one batch's times and store its rows by family (both decode paths end here). The first batches wait
        until _REFERENCE_TOTAL timed events tell the trace's time: a few kernels with a stray timestamp between large
        events at the file's start made most of its first batch, and that batch's median was taken for the trace's."""
        if self._reference_ns is None:  # a byte range is checked against the split's reference: no median needed
            self._note_median(rows)
            if self._timed < _REFERENCE_TOTAL and len(self._waiting) < _MAX_WAITING:
                self._waiting.append(rows)
                return
        waiting, self._waiting = self._waiting, []
        for earlier in waiting:
            self._check_rows(earlier)
        self._check_rows(rows)

    def _note_median(self, rows: _Rows) -> None:
        """The batch's median start and its count of timed events, for the trace's time."""
        timed = (rows.ts_code == OK) & (rows.dur_code == OK) & rows.name_ok
        count = int(timed.sum())
        if count:
            self._medians.append((int(np.median(rows.ts[timed])), count))
            self._timed += count
            if len(self._medians) > _MAX_MEDIANS:  # bounded: pairs of neighbours merged into one
                self._medians = _halved(self._medians)

    def _check_rows(self, rows: _Rows) -> None:
        ts, end, ok = self._check_times(rows.ts, rows.ts_code, rows.dur, rows.dur_code)
        ok &= rows.name_ok
        far = self._far_from_the_rest(ts, ok)
        if far.any():
            self.dropped["ts more than a day away from the rest of the trace"] += int(far.sum())
            ok &= ~far
        # an end that far out is no event either: one ProfilerStep of `dur` 1e15 µs (31 years) made the step time
        # "166666666.68 s" and hid the DataLoader's wait
        long = self._far_from_the_rest(end, ok)
        if long.any():
            self.dropped["dur runs more than a day past the rest of the trace"] += int(long.sum())
            ok &= ~long
        kinds, name = rows.kinds, rows.name
        device = kinds == DEVICE
        if device.any():
            on_device = np.flatnonzero(device)
            cols: Columns = {"ts": ts[on_device], "end": end[on_device], "name": name[on_device]}
            cols |= {"stream": rows.stream, "corr": rows.device_corr, "nbytes": rows.nbytes}
            self._add_device(_valid(cols, ok[on_device]))
            self._count_devices(rows.device_pid, ok[on_device], cols["end"] - cols["ts"])
        threaded = np.flatnonzero(~device)
        if not len(threaded):
            return
        kind = kinds[threaded]
        runtime = kind == RUNTIME
        if runtime.any():
            self._add_runtime(_pick(threaded[runtime], ts, end, name, ok), rows.lane[runtime], rows.runtime_corr)
        cpu = ~runtime
        if cpu.any():
            where = rows.where if rows.where is not None else np.full(int(cpu.sum()), -1, np.int32)
            self._add_cpu(_pick(threaded[cpu], ts, end, name, ok), rows.lane[cpu], kind[cpu], where)

    def _check_times(
        self, ts: I64, ts_code: npt.NDArray[np.int8], dur: I64, dur_code: npt.NDArray[np.int8]
    ) -> tuple[I64, I64, npt.NDArray[np.bool_]]:
        """Start and end in ns of each event, and which ones are valid (the others are counted as dropped)."""
        ok = (ts_code == OK) & (dur_code == OK)
        negative = ok & (dur < 0)  # a time cannot run backwards: such an event is dropped, and counted
        if negative.any():
            self.dropped["dur negative"] += int(negative.sum())
            ok &= ~negative
        dur = np.maximum(dur, 0)
        overflow = ok & (dur > I64_MAX - np.maximum(ts, 0))
        ok &= ~overflow
        if not ok.all():
            self._count_bad("ts", ts_code)
            self._count_bad("dur", np.where(ts_code == OK, dur_code, OK).astype(np.int8))
            if overflow.any():
                self.dropped["ts + dur out of range"] += int(overflow.sum())
        end = np.where(ok, ts + np.where(ok, dur, 0), ts)
        return ts, end, ok

    def _far_from_the_rest(self, ts: I64, ok: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """Events more than a day from the rest: one kernel at ts 0 among events of 2023 would make the window 53 years
        long and the GPU "0.0% busy". A profiler window lasts seconds to minutes. The rest is the trace's time read
        from the byte ranges' first events where the file was split (split.sampled_time), else the median of the
        batches so far, weighted by their sizes: a batch's own median kept a kernel alone in its batch (between large
        events, at the end of a byte range) and fifty strays side by side, and the answer hung on where batches were
        cut."""
        if self._reference_ns is not None:
            middle = self._reference_ns
        elif self._medians:
            middle = _weighted_median(self._medians)
        else:  # no timed event read yet: nothing to tell a stray from
            return np.zeros(len(ts), dtype=bool)
        return ok & (np.abs(ts - middle) > _MAX_SPREAD_NS)

    def _count_devices(self, pids: Any, ok: npt.NDArray[np.bool_], dur: I64) -> None:
        """Each valid device event's device and duration (Collected.device_time)."""
        if pids is None or not ok.any():
            return
        ids = pids if isinstance(pids, np.ndarray) else _int_ids(pids)
        if ids is None:  # a string, float or missing pid somewhere: each one by its text, as the scanner's path keys it
            for pid, good, ns in zip(pids, ok.tolist(), dur.tolist(), strict=False):
                if good:
                    add_device_time(self.device_time, _device_key(pid), 1, ns)
            return
        ids = ids[ok]
        if ids[0] == ids.min() == ids.max():  # one device, nearly always: no sort of the batch's ids
            add_device_time(self.device_time, str(int(ids[0])), len(ids), int(dur[ok].sum()))
            return
        keys, inverse = np.unique(ids, return_inverse=True)
        counts = np.bincount(inverse)
        total = np.bincount(inverse, weights=dur[ok].astype(np.float64))
        for key, n, ns in zip(keys.tolist(), counts.tolist(), total.tolist(), strict=True):
            add_device_time(self.device_time, str(key), n, int(ns))

    def _count_bad(self, field_name: str, codes: npt.NDArray[np.int8]) -> None:
        for code, count in zip(*np.unique(codes[codes != OK], return_counts=True), strict=True):
            word = _CODE_WORDS.get(int(code), "out of range")
            self.dropped[f"{field_name} {word}"] += int(count)

    def _name_ids(self, events: list[Any]) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.bool_]]:
        raw = list(map(_NAME, events))
        if set(map(type, raw)) <= {str}:
            return self.names.intern_column(raw), np.ones(len(raw), dtype=bool)
        ok = np.array([type(n) is str or n is None for n in raw], dtype=bool)
        if not ok.all():  # a missing name (None) is kept as "", and is not counted
            self.dropped["name is not a string"] += int((~ok).sum())
        return self.names.intern_column([n if type(n) is str else "" for n in raw]), ok

    def _wheres_of(self, events: list[Any], kinds: npt.NDArray[np.int8]) -> npt.NDArray[np.int32]:
        texts = [getattr(getattr(e, "args", None), "call_stack", None) for e in events]
        return _ops_only(np.array([self._where_id(t) for t in texts], dtype=np.int32), kinds)

    def _add_device(self, cols: Columns) -> None:
        if not len(cols["ts"]):
            return
        self.stores["gpu"].append(cols)
        first, last = int(cols["ts"].min()), int(cols["end"].max())
        self.gpu_first = first if self.gpu_first is None else min(self.gpu_first, first)
        self.gpu_last = last if self.gpu_last is None else max(self.gpu_last, last)
        d2h = (self.bits_of(cols["name"]) & N.D2H) != 0
        if d2h.any() and self._d2h_count < _D2H_KEEP:
            corr = cols["corr"][d2h & (cols["corr"] >= 0)]
            self._d2h.append(corr)
            self._d2h_count += len(corr)

    def _add_runtime(
        self,
        picked: tuple[I64, I64, npt.NDArray[np.int32], npt.NDArray[np.bool_]],
        lane: npt.NDArray[np.int32],
        corr: I64,
    ) -> None:
        ts, end, name, ok = picked
        cols = _valid({"ts": ts, "end": end, "name": name, "lane": lane, "corr": corr}, ok)
        if len(cols["ts"]):
            self.stores["runtime"].append(cols)
            self.lane_stats.add("runtime", cols["lane"])
            self._saw_op(int(cols["ts"].min()))

    def _add_cpu(
        self,
        picked: tuple[I64, I64, npt.NDArray[np.int32], npt.NDArray[np.bool_]],
        lane: npt.NDArray[np.int32],
        kind: npt.NDArray[np.int8],
        where: npt.NDArray[np.int32],
    ) -> None:
        ts, end, name, ok = picked
        cols = _valid({"ts": ts, "end": end, "name": name, "lane": lane, "kind": kind, "where": where}, ok)
        if not len(cols["ts"]):
            return
        self.stores["cpu"].append(cols)
        lanes = cols["lane"]
        self.lane_stats.add("cpu", lanes)
        bits = self.bits_of(cols["name"])
        self.lane_stats.add("steps", lanes[(bits & N.STEP) != 0])
        self.lane_stats.add("loader", lanes[(bits & N.DATALOADER) != 0])
        ops = cols["kind"] != PYTHON
        if ops.any():
            self._saw_op(int(cols["ts"][ops].min()))

    def _saw_op(self, ts: int) -> None:
        self.first_op = ts if self.first_op is None else min(self.first_op, ts)

    def finish(self) -> Collected:
        waiting, self._waiting = self._waiting, []
        for rows in waiting:  # a trace of fewer than _REFERENCE_TOTAL timed events: judged against all of them
            self._check_rows(rows)
        wheres = [""] * len(self._wheres)
        for text, ident in self._wheres.items():
            wheres[ident] = text
        d2h = distinct(np.concatenate(self._d2h)) if self._d2h else np.zeros(0, np.int64)
        return Collected(
            names=self.names.names,
            name_bits=self.names.bits,
            wheres=wheres,
            lanes=list(self._lane_keys),
            lane_stats=self.lane_stats,
            runs={label: store.finish() for label, store in self.stores.items()},
            events=self.events,
            dropped=self.dropped,
            d2h_corr=d2h,
            gpu_rows=self.stores["gpu"].total,
            gpu_first_ts=self.gpu_first,
            gpu_last_end=self.gpu_last,
            first_op_ts=self.first_op,
            names_overflowed=self.names.overflowed,
            lanes_overflowed=self.lanes_overflowed,
            unread_events=self.unread_events,
            device_time=self.device_time,
        )


def _with_stream(events: list[Any]) -> tuple[list[Any], list[Any]]:
    """Device events are the timed events of other categories that carry a stream; with their args."""
    args = list(map(_ARGS, events))
    if not any(a is None or a.stream is None for a in args):
        return events, args
    keep = [i for i, a in enumerate(args) if a is not None and a.stream is not None]
    return [events[i] for i in keep], [args[i] for i in keep]


def _ops_only(where: npt.NDArray[np.int32], kinds: npt.NDArray[np.int8]) -> npt.NDArray[np.int32]:
    """Only CPU ops and annotations name a line from their call stack (both paths); other rows get -1."""
    where[(kinds != CPU_OP) & (kinds != ANNOTATION)] = -1
    return where


def _values_at(column: list[Any] | I64, rows: npt.NDArray[np.intp]) -> list[Any]:
    """Python values (ints, not numpy's), as msgspec gives them: the thread keys must be the Python path's own."""
    if isinstance(column, np.ndarray):
        values: list[Any] = column[rows].tolist()
        return values
    return [column[i] for i in rows.tolist()]


def _pick(
    rows: npt.NDArray[np.intp], ts: I64, end: I64, name: npt.NDArray[np.int32], ok: npt.NDArray[np.bool_]
) -> tuple[I64, I64, npt.NDArray[np.int32], npt.NDArray[np.bool_]]:
    return ts[rows], end[rows], name[rows], ok[rows]


def _valid(cols: Columns, ok: npt.NDArray[np.bool_]) -> Columns:
    return cols if ok.all() else {k: v[ok] for k, v in cols.items()}


def _hashable(value: Any) -> Any:
    if value is None or type(value) in (str, float, bool):
        return value
    if type(value) is int:
        return value if -(2**63) <= value < 2**63 else "<int>"
    return f"<{type(value).__name__}>"


_I64_RANGE = range(-(2**63), 2**63)
UNKNOWN_DEVICE = "None"  # the key of device events whose pid names no device (a float, a list, out of range)


def _device_key(pid: Any) -> str:
    """A pid as the scanner's path keys it: an int in int64's range or a string as written, anything else unknown."""
    if (type(pid) is int and pid in _I64_RANGE) or type(pid) is str:
        return str(pid)[:40]
    return UNKNOWN_DEVICE


def _int_ids(values: list[Any]) -> I64 | None:
    """The values as an int64 column when every one is a plain int in range (never a float or a bool cast)."""
    if not all(type(v) is int for v in values):
        return None
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        return None


def _weighted_median(medians: list[tuple[int, int]]) -> int:
    """The median of the batches' median starts, each counted as many times as its batch had events."""
    ordered = sorted(medians)
    half = sum(count for _, count in ordered) / 2
    seen = 0
    for middle, count in ordered:
        seen += count
        if seen >= half:
            return middle
    return ordered[-1][0]


def _halved(medians: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Neighbouring batches merged pairwise (the larger one's median, both sizes): a bounded summary of the file."""
    pairs = (medians[i : i + 2] for i in range(0, len(medians), 2))
    return [(max(pair, key=lambda m: m[1])[0], sum(count for _, count in pair)) for pair in pairs]
