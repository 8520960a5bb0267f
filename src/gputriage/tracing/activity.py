"""What the host and device did besides computing: syncs, copies, launches, graphs, communication, CPU math, gaps."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

import numpy as np

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
from gputriage.tracing.analysis import pct
from gputriage.tracing.collect import COMM, PYTHON, Table
from gputriage.tracing.intervals import Spans, intersect, union
from gputriage.tracing.prepared import (
    ALLOC_RE,
    COMPILED_RE,
    OPTIMIZER_RE,
    SYNC_OP_RE,
    Prepared,
)

SHORT_KERNEL_US = 10  # a kernel this short costs about as much to launch (5-10 µs) as to run
SHORT_GAP_NS = 100_000  # idle gaps under 100 µs between kernels are launch latency, not a stall
LONG_GAP_NS = 1_000_000  # a GPU idle gap of 1 ms or more is worth explaining
CPU_OP_MIN_NS = 50_000  # CPU ops shorter than this are dispatch overhead, not computation
_MAX_ATTRIBUTED = 256  # sync calls / gaps whose op and line we look up (the rest are counted, not located)
_TOP_GAPS = 10
_COPY_RE = re.compile(r"^Memcpy (?P<dir>HtoD|DtoH|DtoD|PtoP|HtoH)(?: \((?P<src>\w+) -> (?P<dst>\w+)\))?")
_NON_COMPUTE_OPS = re.compile(
    r"^aten::(to|_to_copy|copy_|empty|empty_strided|zeros|ones|item|_local_scalar_dense|pin_memory|_pin_memory|"
    r"record_stream|set_|resize_|detach|view|reshape|_reshape_alias|stack|cat|t|transpose|permute|expand|"
    r"as_strided|contiguous|slice|select|unsqueeze|squeeze|narrow|flatten|unbind|split|chunk|alias|numpy_T|"
    r"unfold|broadcast_to|lift_fresh|clone|fill_|zero_|random_|normal_|uniform_)$"
)


def _us(ns: float) -> float:
    return round(float(ns) / 1000.0, 3)


def _sample(n: int, limit: int) -> np.ndarray:
    return np.arange(n) if n <= limit else np.linspace(0, n - 1, limit).astype(np.int64)


def syncs(p: Prepared, steps: Spans | None) -> SyncSummary | None:
    """Host-device syncs: the sync runtime calls, plus cudaMemcpy calls whose copy went device-to-host."""
    calls = p.sync_calls
    d2h = _d2h_memcpy_calls(p)
    rt = p.col.runtime
    rows = np.union1d(np.flatnonzero(np.isin(rt.corr, d2h) & (rt.corr >= 0)), _rows_of(p, calls))
    if not len(rows) and not len(rt):
        return None
    ts, end, lane, name = rt.ts[rows], rt.end[rows], rt.lane[rows], rt.name[rows]
    blocking = int((end - ts).sum())
    idle_after = _idle_starting_inside(p, ts, end)
    step_count = len(steps) if steps is not None else 0
    step_total = steps.total() if steps is not None else 0
    window = p.window
    sites: dict[tuple[str, str | None, str | None], list[float]] = defaultdict(lambda: [0, 0.0])
    for i in _sample(len(rows), _MAX_ATTRIBUTED):
        t0, t1, th = int(ts[i]), int(end[i]), int(lane[i])
        key = (p.names[int(name[i])], p.enclosing_op(th, t0, t1), p.where_at(th, t0, t1))
        sites[key][0] += 1
        sites[key][1] += (t1 - t0) / 1000
    ranked = sorted(sites.items(), key=lambda kv: -kv[1][1])[:5]
    return SyncSummary(
        calls=len(rows),
        blocking_us=_us(blocking),
        calls_per_step=round(len(rows) / step_count, 3) if step_count else None,
        blocking_pct_of_steps=pct(blocking, step_total),
        idle_after_sync_us=_us(idle_after),
        idle_after_sync_pct=pct(idle_after, window[1] - window[0]) if window else None,
        sites=[SyncSite(c, op, w, int(v[0]), round(v[1], 3)) for (c, op, w), v in ranked],
    )


def _rows_of(p: Prepared, subset: Table) -> np.ndarray:
    rt = p.col.runtime
    rows: np.ndarray = np.flatnonzero(np.isin(rt.name, np.unique(subset.name)))
    return rows


def _d2h_memcpy_calls(p: Prepared) -> np.ndarray:
    g = p.col.gpu
    is_d2h = np.fromiter((n.startswith("Memcpy DtoH") for n in p.names), dtype=bool, count=len(p.names))
    if not len(g) or not len(p.names):
        return np.zeros(0, np.int64)
    corr: np.ndarray = g.corr[is_d2h[g.name]]
    return corr


def _idle_starting_inside(p: Prepared, ts: np.ndarray, end: np.ndarray) -> int:
    """GPU idle time in gaps that begin while the host is inside one of the given calls.

    The sync let the device's queue run dry; the gap lasts until the host enqueues work again. The part of such a
    gap that the host spends in the DataLoader is left to the DataLoader (the sync only exposed it).
    """
    gaps = p.busy.gaps()
    if not len(gaps) or not len(ts):
        return 0
    calls = union(ts, end)
    inside = calls.overlap_each(gaps.start, gaps.start + 1) > 0
    length = gaps.end[inside] - gaps.start[inside]
    loader = p.dataloader.overlap_each(gaps.start[inside], gaps.end[inside])
    return int((length - loader).sum())


def copies(p: Prepared) -> CopySummary | None:
    g = p.col.gpu
    if not len(g):
        return None
    parsed = [_COPY_RE.match(n) for n in p.names]
    direction = np.array([m["dir"] if m else "" for m in parsed], dtype=object)
    src = np.array([(m["src"] or "") if m else "" for m in parsed], dtype=object)
    dst = np.array([(m["dst"] or "") if m else "" for m in parsed], dtype=object)
    d, s, t = direction[g.name], src[g.name], dst[g.name]
    dur = g.end - g.ts
    nbytes = np.maximum(g.extra, 0)
    h2d, d2h = d == "HtoD", d == "DtoH"
    pageable_h2d, pinned_h2d = h2d & (s == "Pageable"), h2d & (s == "Pinned")
    window = p.window
    return CopySummary(
        h2d_count=int(h2d.sum()),
        h2d_bytes=int(nbytes[h2d].sum()),
        h2d_us=_us(dur[h2d].sum()),
        pageable_h2d_count=int(pageable_h2d.sum()),
        pageable_h2d_bytes=int(nbytes[pageable_h2d].sum()),
        pageable_h2d_us=_us(dur[pageable_h2d].sum()),
        pinned_h2d_count=int(pinned_h2d.sum()),
        d2h_count=int(d2h.sum()),
        d2h_us=_us(dur[d2h].sum()),
        pageable_d2h_count=int((d2h & (t == "Pageable")).sum()),
        pageable_h2d_pct_of_window=pct(float(dur[pageable_h2d].sum()), window[1] - window[0]) if window else None,
    )


def launches(p: Prepared, step_count: int) -> LaunchSummary | None:
    k = p.kernels
    if not len(k):
        return None
    dur_us = (k.end - k.ts) / 1000
    launch_ns = p.launch_durations_ns
    runtime_ts = p.runtime_ts_for(k.corr)
    delay = (k.ts - runtime_ts)[~np.isnan(runtime_ts)] / 1000
    gaps = p.busy.gaps()
    gap_len = gaps.end - gaps.start
    idle = gap_len.sum()
    return LaunchSummary(
        kernels=len(k),
        kernels_per_step=round(len(k) / step_count, 1) if step_count else None,
        median_kernel_us=round(float(np.median(dur_us)), 3),
        short_kernel_pct=pct(int((dur_us < SHORT_KERNEL_US).sum()), len(k)),
        median_launch_us=round(float(np.median(launch_ns)) / 1000, 3) if len(launch_ns) else None,
        median_launch_delay_us=round(float(np.median(delay)), 3) if len(delay) else None,
        idle_in_short_gaps_pct=pct(int(gap_len[gap_len < SHORT_GAP_NS].sum()), int(idle)),
    )


def graphs(p: Prepared) -> GraphSummary:
    """CUDA graphs and torch.compile: replayed kernels hide which op ran them."""
    k = p.col.gpu
    launches_ = p.graph_launches
    in_graph = np.isin(k.corr, launches_.corr) & (k.corr >= 0)
    no_launch = np.isnan(p.runtime_ts_for(k.corr))
    unattributed = union(k.ts[in_graph | no_launch], k.end[in_graph | no_launch]).total()
    triton = np.fromiter(("triton" in n for n in p.names), dtype=bool, count=len(p.names))
    return GraphSummary(
        graph_launches=len(launches_),
        graph_kernels=int(in_graph.sum()),
        compiled_regions=len(p.cpu_named(COMPILED_RE)),
        triton_kernels=int(triton[p.kernels.name].sum()) if len(p.names) else 0,
        unattributed_gpu_us=_us(unattributed),
        unattributed_gpu_pct=pct(unattributed, p.busy.total()),
    )


def comm(p: Prepared) -> CommSummary | None:
    c = p.comm
    if not len(c):
        return None
    total = c.total()
    overlap = c.overlap(p.compute)
    window = p.window
    kernels = int((p.gpu_kind == COMM).sum())
    return CommSummary(
        kernels=kernels,
        comm_us=_us(total),
        overlap_us=_us(overlap),
        overlap_pct=pct(overlap, total),
        comm_pct_of_window=pct(total, window[1] - window[0]) if window else None,
    )


def cpu_compute(p: Prepared, steps: Spans | None) -> CpuComputeSummary | None:
    """ATen ops that ran long on a CPU thread and launched no device work, outside the DataLoader."""
    ops = p.cpu_ops
    if not len(ops):
        return None
    names = p.names
    aten = np.fromiter(
        (n.startswith("aten::") and not _NON_COMPUTE_OPS.match(n) for n in names), dtype=bool, count=len(names)
    )
    cand = np.flatnonzero(aten[ops.name] & (ops.end - ops.ts >= CPU_OP_MIN_NS))
    rt = p.col.runtime
    keep: list[int] = []
    for lane in np.unique(ops.lane[cand]):
        mine = cand[ops.lane[cand] == lane]
        rts = np.sort(rt.ts[rt.lane == lane])
        launched = np.searchsorted(rts, ops.end[mine]) - np.searchsorted(rts, ops.ts[mine])
        keep.extend(mine[launched == 0].tolist())
    rows = np.array(keep, dtype=np.int64)
    spans = union(ops.ts[rows], ops.end[rows]).minus(p.dataloader)
    if steps is not None and len(steps):
        spans = intersect(spans, steps)
    total = spans.total()
    window = p.window
    idle = Spans.empty()
    if window is not None:
        idle = p.busy.gaps()
    idle_during = intersect(spans, idle).total() if window is not None else total
    step_total = steps.total() if steps is not None and len(steps) else 0
    top: Counter[str] = Counter()
    for r in rows:
        top[names[int(ops.name[r])]] += int(ops.end[r] - ops.ts[r])
    where = None
    if len(rows):
        longest = int(rows[np.argmax(ops.end[rows] - ops.ts[rows])])
        where = p.where_at(int(ops.lane[longest]), int(ops.ts[longest]), int(ops.end[longest]))
    return CpuComputeSummary(
        ops=len(rows),
        cpu_compute_us=_us(total),
        pct_of_steps=pct(total, step_total),
        gpu_idle_during_us=_us(idle_during),
        gpu_idle_during_pct_of_steps=pct(idle_during, step_total),
        top_ops=[n for n, _ in top.most_common(3)],
        where=where,
    )


# The order decides who gets an instant that two activities share: the more specific explanation first.
_ACTIVITIES = ("dataloader", "sync", "optimizer", "allocator", "cpu-op")


def gaps(p: Prepared, steps: Spans | None) -> GapSummary | None:
    """Every GPU idle gap of LONG_GAP_NS or more, with what the main thread did meanwhile."""
    window = p.window
    if window is None:
        return None
    all_gaps = p.busy.gaps()
    long_ = all_gaps.end - all_gaps.start >= LONG_GAP_NS
    gap_spans = Spans(all_gaps.start[long_], all_gaps.end[long_])
    layers = _activity_layers(p)
    claimed = Spans.empty()
    by_activity: dict[str, float] = {}
    per_gap: dict[str, np.ndarray] = {}
    for label, layer in zip(_ACTIVITIES, layers, strict=True):
        mine = intersect(layer, gap_spans).minus(claimed)
        by_activity[label] = _us(mine.total())
        per_gap[label] = mine.overlap_each(gap_spans.start, gap_spans.end)
        claimed = union(np.concatenate((claimed.start, mine.start)), np.concatenate((claimed.end, mine.end)))
    rest = gap_spans.end - gap_spans.start - claimed.overlap_each(gap_spans.start, gap_spans.end)
    in_steps = steps.overlap_each(gap_spans.start, gap_spans.end) if steps is not None and len(steps) else None
    by_activity["python"] = _us(rest.sum() if in_steps is None else np.minimum(rest, in_steps).sum())
    if in_steps is not None:
        by_activity["outside-steps"] = _us((rest - np.minimum(rest, in_steps)).sum())
    order = np.argsort(-(gap_spans.end - gap_spans.start), kind="stable")[:_TOP_GAPS]
    top = [
        _describe_gap(p, gap_spans, int(i), per_gap=per_gap, rest=rest, in_steps=in_steps, origin=window[0])
        for i in order
    ]
    total = gap_spans.total()
    return GapSummary(
        threshold_us=LONG_GAP_NS / 1000,
        count=len(gap_spans),
        total_us=_us(total),
        pct_of_window=pct(total, window[1] - window[0]),
        by_activity_us={k: v for k, v in by_activity.items() if v > 0},
        top=top,
    )


def _activity_layers(p: Prepared) -> list[Spans]:
    main = p.main_thread if p.main_thread is not None else -1
    rt = p.col.runtime
    ops = p.col.cpu

    def spans_of(table_ts: np.ndarray, table_end: np.ndarray) -> Spans:
        return union(table_ts, table_end)

    sync_rt = p.sync_calls
    sync_ops = p.cpu_named(SYNC_OP_RE, main_only=True)
    sync = spans_of(
        np.concatenate((sync_rt.ts[sync_rt.lane == main], sync_ops.ts)),
        np.concatenate((sync_rt.end[sync_rt.lane == main], sync_ops.end)),
    )
    opt = p.cpu_named(OPTIMIZER_RE, main_only=True)
    alloc = p.runtime_named(ALLOC_RE)
    on_main_ops = (ops.lane == main) & (ops.extra != PYTHON) & ~np.isin(ops.name, _step_name_ids(p))
    on_main_rt = rt.lane == main
    busy_cpu = spans_of(
        np.concatenate((ops.ts[on_main_ops], rt.ts[on_main_rt])),
        np.concatenate((ops.end[on_main_ops], rt.end[on_main_rt])),
    )
    return [
        p.dataloader,
        sync,
        spans_of(opt.ts, opt.end),
        spans_of(alloc.ts[alloc.lane == main], alloc.end[alloc.lane == main]),
        busy_cpu,
    ]


def _step_name_ids(p: Prepared) -> np.ndarray:
    return np.array([i for i, n in enumerate(p.names) if n.startswith("ProfilerStep#")], dtype=np.int64)


def _describe_gap(
    p: Prepared,
    gap_spans: Spans,
    i: int,
    *,
    per_gap: dict[str, np.ndarray],
    rest: np.ndarray,
    in_steps: np.ndarray | None,
    origin: int,
) -> IdleGap:
    start, end = int(gap_spans.start[i]), int(gap_spans.end[i])
    shares = {label: float(v[i]) for label, v in per_gap.items()}
    python_ns = float(rest[i]) if in_steps is None else float(min(rest[i], in_steps[i]))
    shares["python"] = python_ns
    if in_steps is not None:
        shares["outside-steps"] = float(rest[i]) - python_ns
    activity = max(shares, key=lambda k: shares[k])
    main = p.main_thread if p.main_thread is not None else -1
    return IdleGap(
        start_us=_us(start - origin),
        dur_us=_us(end - start),
        activity=activity,
        op=_longest_op_in(p, main, start, end),
        where=p.where_at(main, start + (end - start) // 2, start + (end - start) // 2),
    )


def _longest_op_in(p: Prepared, lane: int, start: int, end: int) -> str | None:
    """The op or annotation on the main thread that covers most of [start, end], ProfilerStep excluded; a runtime
    call (cudaFree, cudaMemcpy, ...) only when no op covers the gap."""
    steps = _step_name_ids(p)
    for table, is_cpu in ((p.col.cpu, True), (p.col.runtime, False)):
        hit = (table.lane == lane) & (table.ts < end) & (table.end > start)
        if is_cpu:
            hit &= (table.extra != PYTHON) & ~np.isin(table.name, steps)
        on = np.flatnonzero(hit)
        if len(on):
            cover = np.minimum(table.end[on], end) - np.maximum(table.ts[on], start)
            return p.names[int(table.name[on[int(np.argmax(cover))]])]
    return None
