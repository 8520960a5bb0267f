"""What the host and device did besides computing: syncs, copies, launches, graphs, communication, CPU math, gaps.

Each is an accumulator fed one window at a time (sweep.py); idle gaps arrive complete from gaps.py.
"""

from __future__ import annotations

import heapq
from collections import Counter

import msgspec
import numpy as np
import numpy.typing as npt

from gputriage.record.trace import (
    CommSummary,
    CopySummary,
    CpuComputeSummary,
    GapSummary,
    GraphSummary,
    IdleGap,
    LaunchSummary,
    SyncSite,
    SyncSummary,
)
from gputriage.tracing import names as N
from gputriage.tracing.analysis import pct
from gputriage.tracing.distinct import distinct
from gputriage.tracing.families import CPU_OP
from gputriage.tracing.gaps import ACTIVITIES, LONG_GAP_NS, SHORT_GAP_NS, Gaps
from gputriage.tracing.intervals import Spans, intersect
from gputriage.tracing.quantile import Median, median_us
from gputriage.tracing.store import SpillDir
from gputriage.tracing.sweep import CPU_OP_MIN_NS, Context, Window

SHORT_KERNEL_NS = 10_000  # a kernel this short costs about as much to launch (5-10 µs) as to run
MAX_ATTRIBUTED = 4096  # sync calls whose op and line are looked up (the rest are counted, not located)
MAX_GRAPH_LAUNCHES = 1 << 20
MAX_COLLECTIVES = 100_000
_TOP_GAPS = 10
_TOP_SITES = 5

I64 = npt.NDArray[np.int64]


def _us(ns: float) -> float:
    return round(float(ns) / 1000.0, 3)


class Syncs(msgspec.Struct):
    """Host-device syncs: the sync runtime calls, plus cudaMemcpy calls whose copy went device-to-host."""

    calls: int = 0
    copy_calls: int = 0  # of `calls`, the copies that went device-to-host (not a sync call by name)
    blocking_ns: int = 0
    # Per step: only the calls that start inside a ProfilerStep, and the time the host is blocked inside the steps.
    # A sync after the last step (a final cudaDeviceSynchronize, an evaluation) is no cost of the steps.
    calls_in_steps: int = 0
    blocking_in_steps_ns: int = 0
    idle_after_ns: float = 0.0
    runtime_rows: int = 0
    # The first MAX_ATTRIBUTED calls, in time order: (call, enclosing op, line) and the call's duration in ms.
    located: list[tuple[tuple[str, str | None, str | None], float]] = msgspec.field(default_factory=list)

    def add(self, w: Window) -> None:
        self.runtime_rows += int(w.runtime_new.sum())
        mask = w.runtime_sync
        steps = w.steps
        if mask.any() and len(steps):  # the carried calls too: each window adds its own part of a long one
            self.blocking_in_steps_ns += intersect(w.spans(w.runtime, mask), steps).total()
        rows = np.flatnonzero(mask & w.runtime_new)
        if not len(rows):
            return
        rt = w.runtime
        ts, end, lane, name = rt["ts"][rows], rt["end"][rows], rt["lane"][rows], rt["name"][rows]
        self.calls += len(rows)
        self.copy_calls += int((~w.runtime_has(N.SYNC_CALL)[rows]).sum())
        self.blocking_ns += int((end - ts).sum())
        self.calls_in_steps += int(steps.contains(ts).sum())
        room = max(MAX_ATTRIBUTED - len(self.located), 0)
        for i in range(min(room, len(rows))):
            t0, t1, th = int(ts[i]), int(end[i]), int(lane[i])
            key = (w.ctx.names[int(name[i])], w.enclosing_op(th, t0, t1), w.where_at(th, t0, t1))
            self.located.append((key, (t1 - t0) / 1000))

    def merge(self, later: Syncs) -> None:
        self.calls += later.calls
        self.copy_calls += later.copy_calls
        self.blocking_ns += later.blocking_ns
        self.calls_in_steps += later.calls_in_steps
        self.blocking_in_steps_ns += later.blocking_in_steps_ns
        self.idle_after_ns += later.idle_after_ns
        self.runtime_rows += later.runtime_rows
        self.located.extend(later.located[: MAX_ATTRIBUTED - len(self.located)])

    def on_gaps(self, gaps: Gaps) -> None:
        """GPU idle time in gaps that begin while the host is inside a sync call.

        The sync let the device's queue run dry; the gap lasts until the host enqueues work again. The part of such
        a gap that the host spends in the DataLoader is left to the DataLoader (the sync only exposed it).
        """
        if len(gaps.start) and "sync_start" in gaps.values:
            inside = gaps.values["sync_start"] > 0
            self.idle_after_ns += float((gaps.length[inside] - gaps.values["loader"][inside]).sum())

    def result(self, ctx: Context, step_count: int, step_total_ns: int) -> SyncSummary | None:
        if not self.calls and not self.runtime_rows:
            return None
        window = ctx.window_ns
        sites: dict[tuple[str, str | None, str | None], list[float]] = {}
        for key, ms in self.located:
            site = sites.setdefault(key, [0, 0.0])
            site[0] += 1
            site[1] += ms
        ranked = sorted(sites.items(), key=lambda kv: -kv[1][1])[:_TOP_SITES]
        return SyncSummary(
            calls=self.calls,
            blocking_us=_us(self.blocking_ns),
            copy_calls=self.copy_calls,
            calls_per_step=round(self.calls_in_steps / step_count, 3) if step_count else None,
            blocking_pct_of_steps=pct(self.blocking_in_steps_ns, step_total_ns),
            idle_after_sync_us=_us(self.idle_after_ns) if window is not None else None,
            idle_after_sync_pct=pct(self.idle_after_ns, window) if window is not None else None,
            sites=[SyncSite(c, op, w, int(v[0]), round(v[1], 3)) for (c, op, w), v in ranked],
        )


class Copies(msgspec.Struct):
    sums: Counter[str] = msgspec.field(default_factory=Counter)
    rows: int = 0

    def add(self, w: Window) -> None:
        new = w.gpu_new
        if not new.any():
            return
        self.rows += int(new.sum())
        bits = w.gpu_bits[new]
        dur = (w.gpu["end"] - w.gpu["ts"])[new]
        nbytes = np.maximum(w.gpu["nbytes"][new], 0)
        h2d, d2h = (bits & N.H2D) != 0, (bits & N.D2H) != 0
        pageable_h2d = h2d & ((bits & N.SRC_PAGEABLE) != 0)
        s = self.sums
        for label, mask in (("h2d", h2d), ("pageable_h2d", pageable_h2d), ("d2h", d2h)):
            s[f"{label}_count"] += int(mask.sum())
            s[f"{label}_bytes"] += int(nbytes[mask].sum())
            s[f"{label}_ns"] += int(dur[mask].sum())
        s["pinned_h2d_count"] += int((h2d & ((bits & N.SRC_PINNED) != 0)).sum())
        s["pageable_d2h_count"] += int((d2h & ((bits & N.DST_PAGEABLE) != 0)).sum())

    def merge(self, later: Copies) -> None:
        self.sums.update(later.sums)
        self.rows += later.rows

    def result(self, ctx: Context) -> CopySummary | None:
        if not self.rows:
            return None
        s, window = self.sums, ctx.window_ns
        return CopySummary(
            h2d_count=s["h2d_count"],
            h2d_bytes=s["h2d_bytes"],
            h2d_us=_us(s["h2d_ns"]),
            pageable_h2d_count=s["pageable_h2d_count"],
            pageable_h2d_bytes=s["pageable_h2d_bytes"],
            pageable_h2d_us=_us(s["pageable_h2d_ns"]),
            pinned_h2d_count=s["pinned_h2d_count"],
            d2h_count=s["d2h_count"],
            d2h_us=_us(s["d2h_ns"]),
            pageable_d2h_count=s["pageable_d2h_count"],
            pageable_h2d_pct_of_window=pct(float(s["pageable_h2d_ns"]), window) if window is not None else None,
        )


class Launches(msgspec.Struct):
    kernel_ns: Median
    launch_ns: Median
    delay_ns: Median
    kernels: int = 0
    short: int = 0
    idle_ns: float = 0.0
    idle_short_ns: float = 0.0

    @classmethod
    def create(cls, spill: SpillDir) -> Launches:
        return cls(Median(spill, "kernel"), Median(spill, "launch"), Median(spill, "delay"))

    def add(self, w: Window) -> None:
        kernels = np.flatnonzero(w.gpu_new & w.gpu_kernel)
        if len(kernels):
            dur = w.gpu["end"][kernels] - w.gpu["ts"][kernels]
            self.kernels += len(kernels)
            self.short += int((dur < SHORT_KERNEL_NS).sum())
            self.kernel_ns.add(dur)
            found = w.launch_found[kernels]
            if found.any():
                self.delay_ns.add(w.gpu["ts"][kernels][found] - w.launch_ns[kernels][found])
        calls = w.runtime_new & w.runtime_has(N.LAUNCH)
        if calls.any():
            self.launch_ns.add(w.runtime["end"][calls] - w.runtime["ts"][calls])

    def on_gaps(self, gaps: Gaps) -> None:
        length = gaps.length
        self.idle_ns += float(length.sum())
        self.idle_short_ns += float(length[length < SHORT_GAP_NS].sum())

    def to_files(self) -> None:
        for median in (self.kernel_ns, self.launch_ns, self.delay_ns):
            median.to_file()

    def merge(self, later: Launches) -> None:
        self.kernel_ns.merge(later.kernel_ns)
        self.launch_ns.merge(later.launch_ns)
        self.delay_ns.merge(later.delay_ns)
        self.kernels += later.kernels
        self.short += later.short
        self.idle_ns += later.idle_ns
        self.idle_short_ns += later.idle_short_ns

    def result(self, step_count: int) -> LaunchSummary | None:
        if not self.kernels:
            return None
        return LaunchSummary(
            kernels=self.kernels,
            kernels_per_step=round(self.kernels / step_count, 1) if step_count else None,
            median_kernel_us=median_us(self.kernel_ns.middle(), divide_first=True),
            short_kernel_pct=pct(self.short, self.kernels),
            median_launch_us=median_us(self.launch_ns.middle(), divide_first=False),
            median_launch_delay_us=median_us(self.delay_ns.middle(), divide_first=True),
            idle_in_short_gaps_pct=pct(int(self.idle_short_ns), int(self.idle_ns)),
        )


class Graphs(msgspec.Struct):
    """CUDA graphs and torch.compile: replayed kernels hide which op ran them."""

    launches: int = 0
    graph_corr: I64 = msgspec.field(default_factory=lambda: np.zeros(0, np.int64))
    graph_kernels: int = 0
    compiled: int = 0
    triton: int = 0
    unattributed_ns: int = 0

    def add(self, w: Window) -> None:
        calls = w.runtime_new & w.runtime_has(N.GRAPH_LAUNCH)
        if calls.any():
            self.launches += int(calls.sum())
            if len(self.graph_corr) < MAX_GRAPH_LAUNCHES:
                self.graph_corr = np.union1d(self.graph_corr, w.runtime["corr"][calls])
        corr = w.gpu["corr"]
        in_graph = np.isin(corr, self.graph_corr) & (corr >= 0) if len(self.graph_corr) else np.zeros(len(corr), bool)
        self.graph_kernels += int((in_graph & w.gpu_new).sum())
        unattributed = in_graph | np.isnan(w.launch_ts)
        self.unattributed_ns += w.spans(w.gpu, unattributed).total()
        self.compiled += int((w.cpu_new & w.cpu_not_python & w.cpu_has(N.COMPILED)).sum())
        self.triton += int((w.gpu_new & w.gpu_kernel & w.gpu_has(N.TRITON)).sum())

    def merge(self, later: Graphs) -> None:
        # later.graph_corr began with every graph launch before its stretch (segments.py): it holds ours.
        self.graph_corr = later.graph_corr
        self.launches += later.launches
        self.graph_kernels += later.graph_kernels
        self.compiled += later.compiled
        self.triton += later.triton
        self.unattributed_ns += later.unattributed_ns

    def result(self, busy_ns: int) -> GraphSummary:
        return GraphSummary(
            graph_launches=self.launches,
            graph_kernels=self.graph_kernels,
            compiled_regions=self.compiled,
            triton_kernels=self.triton,
            unattributed_gpu_us=_us(self.unattributed_ns),
            unattributed_gpu_pct=pct(self.unattributed_ns, busy_ns),
        )


class Comm(msgspec.Struct):
    kernels: int = 0
    comm_ns: int = 0
    overlap_ns: int = 0

    def add(self, w: Window) -> None:
        self.kernels += int((w.gpu_new & w.gpu_has(N.COMM)).sum())
        comm = w.comm
        if len(comm):
            self.comm_ns += comm.total()
            self.overlap_ns += comm.overlap(w.compute)

    def merge(self, later: Comm) -> None:
        self.kernels += later.kernels
        self.comm_ns += later.comm_ns
        self.overlap_ns += later.overlap_ns

    def result(self, ctx: Context) -> CommSummary | None:
        if not self.kernels:
            return None
        window = ctx.window_ns
        return CommSummary(
            kernels=self.kernels,
            comm_us=_us(self.comm_ns),
            overlap_us=_us(self.overlap_ns),
            overlap_pct=pct(self.overlap_ns, self.comm_ns),
            comm_pct_of_window=pct(self.comm_ns, window) if window is not None else None,
        )


class CpuCompute(msgspec.Struct):
    """ATen ops that ran long on a CPU thread and launched no device work, outside the DataLoader.

    An op is judged within each window it spans (the windows are cut outside long ops whenever possible).
    """

    op_rows: int = 0
    kept: int = 0
    total_ns: int = 0
    idle_during_ns: float = 0.0
    top: Counter[int] = msgspec.field(default_factory=Counter)
    longest_ns: int = -1
    where: str | None = None
    spans: Spans = msgspec.field(default_factory=Spans.empty)  # this window's kept time (read by the gap measures)

    def add(self, w: Window) -> None:
        cpu = w.cpu
        ops = cpu["kind"] == CPU_OP
        self.op_rows += int((ops & w.cpu_new).sum())
        candidates = np.flatnonzero(ops & w.cpu_has(N.CPU_COMPUTE) & (cpu["end"] - cpu["ts"] >= CPU_OP_MIN_NS))
        kept = self._without_launches(w, candidates)
        spans = w.spans(cpu, _mask(len(cpu["ts"]), kept)).minus(w.dataloader)
        if w.ctx.has_steps:
            spans = intersect(spans, w.steps)
        self.spans = spans
        self.total_ns += spans.total()
        new = kept[w.cpu_new[kept]]
        if not len(new):
            return
        dur = cpu["end"][new] - cpu["ts"][new]
        self.kept += len(new)
        for name, d in zip(cpu["name"][new].tolist(), dur.tolist(), strict=True):
            self.top[name] += d
        longest = int(np.argmax(dur))
        if int(dur[longest]) > self.longest_ns:
            row = int(new[longest])
            self.longest_ns = int(dur[longest])
            self.where = w.where_at(int(cpu["lane"][row]), int(cpu["ts"][row]), int(cpu["end"][row]))

    @staticmethod
    def _without_launches(w: Window, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
        """The candidate ops during which their thread started no runtime call (within this window)."""
        if not len(rows):
            return rows
        cpu, rt = w.cpu, w.runtime
        keep: list[npt.NDArray[np.intp]] = []
        new_rt = w.runtime_new
        for lane in distinct(cpu["lane"][rows]).tolist():
            mine = rows[cpu["lane"][rows] == lane]
            starts = np.sort(rt["ts"][new_rt & (rt["lane"] == lane)])
            lo = np.maximum(cpu["ts"][mine], w.lo)
            launched = np.searchsorted(starts, cpu["end"][mine]) - np.searchsorted(starts, lo)
            keep.append(mine[launched == 0])
        return np.sort(np.concatenate(keep))

    def on_gaps(self, gaps: Gaps) -> None:
        if "cpu" in gaps.values:
            self.idle_during_ns += float(gaps.values["cpu"].sum())

    def merge(self, later: CpuCompute) -> None:
        self.op_rows += later.op_rows
        self.kept += later.kept
        self.total_ns += later.total_ns
        self.idle_during_ns += later.idle_during_ns
        self.top.update(later.top)
        if later.longest_ns > self.longest_ns:  # the first of equally long ops, as in one sweep
            self.longest_ns, self.where = later.longest_ns, later.where

    def result(self, ctx: Context, step_total_ns: int) -> CpuComputeSummary | None:
        if not self.op_rows:
            return None
        return CpuComputeSummary(
            ops=self.kept,
            cpu_compute_us=_us(self.total_ns),
            pct_of_steps=pct(self.total_ns, step_total_ns),
            # Without a device event the GPU's idle time was not measured (the profiler recorded the CPU only).
            gpu_idle_during_us=_us(self.idle_during_ns) if ctx.gpu_rows else None,
            gpu_idle_during_pct_of_steps=pct(self.idle_during_ns, step_total_ns) if ctx.gpu_rows else None,
            top_ops=[ctx.names[n] for n, _ in self.top.most_common(3)],
            where=self.where,
        )


def _mask(size: int, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
    out = np.zeros(size, dtype=bool)
    out[rows] = True
    return out


class LongGaps(msgspec.Struct):
    """Every GPU idle gap of LONG_GAP_NS or more, with what the main thread did meanwhile."""

    count: int = 0
    total_ns: int = 0
    by_activity: dict[str, float] = msgspec.field(
        default_factory=lambda: dict.fromkeys((*ACTIVITIES, "python", "outside-steps"), 0.0)
    )
    # The longest gaps so far, as a min-heap of (length, -order, order, start, end, activity, op, where).
    top: list[tuple[int, int, int, int, int, str, str | None, str | None]] = msgspec.field(default_factory=list)
    _order: int = 0

    def on_gaps(self, w: Window, gaps: Gaps) -> None:
        long_ = np.flatnonzero(gaps.length >= LONG_GAP_NS)
        if not len(long_):
            return
        length = gaps.length[long_]
        v = {k: col[long_] for k, col in gaps.values.items()}
        rest = length - v["claimed"]
        steps = w.ctx.has_steps
        python = np.minimum(rest, v["steps"]) if steps else rest
        self.count += len(long_)
        self.total_ns += int(length.sum())
        for label in ACTIVITIES:
            self.by_activity[label] += float(v[label].sum())
        self.by_activity["python"] += float(python.sum())
        if steps:
            self.by_activity["outside-steps"] += float((rest - python).sum())
        for j, i in enumerate(long_.tolist()):
            order = self._order
            self._order += 1
            if len(self.top) >= _TOP_GAPS and (int(length[j]), -order) <= self.top[0][:2]:
                continue
            shares = {label: float(v[label][j]) for label in ACTIVITIES}
            shares["python"] = float(python[j])
            if steps:
                shares["outside-steps"] = float(rest[j] - python[j])
            start, end = int(gaps.start[i]), int(gaps.end[i])
            middle = start + (end - start) // 2
            where = w.where_at(w.ctx.main_lane, middle, middle) if middle >= w.lo else None
            activity = max(shares, key=lambda k: shares[k])
            item = (int(length[j]), -order, order, start, end, activity, _longest_op_in(w, start, end), where)
            heapq.heappush(self.top, item)
            if len(self.top) > _TOP_GAPS:
                heapq.heappop(self.top)

    def merge(self, later: LongGaps) -> None:
        self.count += later.count
        self.total_ns += later.total_ns
        for label, ns in later.by_activity.items():
            self.by_activity[label] += ns
        for length, _, theirs, start, end, activity, op, where in later.top:
            order = theirs + self._order  # numbered after ours, as one sweep would have numbered them
            heapq.heappush(self.top, (length, -order, order, start, end, activity, op, where))
            if len(self.top) > _TOP_GAPS:
                heapq.heappop(self.top)
        self._order += later._order

    def result(self, ctx: Context) -> GapSummary | None:
        window = ctx.window_ns
        if window is None:
            return None
        origin = ctx.gpu_first or 0
        ranked = sorted(self.top, key=lambda item: (-item[0], item[2]))
        by_activity = {k: _us(self.by_activity[k]) for k in (*ACTIVITIES, "python", "outside-steps")}
        return GapSummary(
            threshold_us=LONG_GAP_NS / 1000,
            count=self.count,
            total_us=_us(self.total_ns),
            pct_of_window=pct(self.total_ns, window),
            by_activity_us={k: v for k, v in by_activity.items() if v > 0},
            top=[IdleGap(_us(s - origin), _us(e - s), act, op, where) for _, _, _, s, e, act, op, where in ranked],
        )


def _longest_op_in(w: Window, start: int, end: int) -> str | None:
    """The op or annotation on the main thread that covers most of [start, end], ProfilerStep excluded; a runtime
    call (cudaFree, cudaMemcpy, ...) only when no op covers the gap."""
    main = w.ctx.main_lane
    cpu_ok = w.cpu_not_python & ~w.cpu_has(N.STEP)
    for table, extra in ((w.cpu, cpu_ok), (w.runtime, None)):
        hit = (table["lane"] == main) & (table["ts"] < end) & (table["end"] > start)
        if extra is not None:
            hit &= extra
        on = np.flatnonzero(hit)
        if len(on):
            cover = np.minimum(table["end"][on], end) - np.maximum(table["ts"][on], start)
            # Nested ops often cover the gap equally: the innermost (latest start, then earliest end) says most.
            best = np.lexsort((-table["end"][on], table["ts"][on], cover))[-1]
            return w.ctx.names[int(table["name"][on[best]])]
    return None


class Collectives(msgspec.Struct):
    """A rank's communication kernels (start, end) in time order, in ns: what multi-rank straggler checks need."""

    start_ns: list[int] = msgspec.field(default_factory=list)
    end_ns: list[int] = msgspec.field(default_factory=list)

    def add(self, w: Window) -> None:
        room = MAX_COLLECTIVES - len(self.start_ns)
        if room <= 0:
            return
        rows = np.flatnonzero(w.gpu_new & w.gpu_has(N.COMM))[:room]
        self.start_ns.extend(w.gpu["ts"][rows].tolist())
        self.end_ns.extend(w.gpu["end"][rows].tolist())

    def merge(self, later: Collectives) -> None:
        room = max(MAX_COLLECTIVES - len(self.start_ns), 0)
        self.start_ns.extend(later.start_ns[:room])
        self.end_ns.extend(later.end_ns[:room])


class LoaderWhere(msgspec.Struct):
    """Where the user's code iterates the DataLoader: only a 'Call stack' taken at the loader call can say.

    A Python frame's name gives the line its function was defined on (or, for a frame already running when the
    profiler started, the line it was on then), never the line of the `for` over the loader: no `where` from those.
    """

    done: bool = False
    where: str | None = None

    def add(self, w: Window) -> None:
        if self.done:
            return
        rows = np.flatnonzero(w.cpu_new & w.cpu_has(N.DATALOADER) & w.cpu_not_python & w.cpu_on_main)
        if len(rows):
            row = int(rows[0])
            cpu = w.cpu
            self.where = w.stack_where(int(cpu["lane"][row]), int(cpu["ts"][row]), int(cpu["end"][row]))
            self.done = True

    def merge(self, later: LoaderWhere) -> None:
        if not self.done:
            self.done, self.where = later.done, later.where
