"""One trace file -> one RankTrace (docs/contract.md's fields plus the evidence the rules read).

Pass one (split.py) validates the events and keeps compact rows and a few statistics; pass two sweeps the timeline
one window at a time (sweep.py) and feeds every accumulator. Memory is one batch plus one window, whatever the
trace's size; temporary files (store.py) are removed before this returns, also on an error.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any, cast

import msgspec
import numpy as np
import numpy.typing as npt

from gputriage import outdir
from gputriage.errors import InputError
from gputriage.record.trace import DeviceTime, RankTrace
from gputriage.tracing import activity, analysis, segments
from gputriage.tracing.activity import Collectives
from gputriage.tracing.collect import UNKNOWN_DEVICE, Collected
from gputriage.tracing.gaps import ACTIVITIES, LONG_GAP_NS, GapTracker, claim_activities
from gputriage.tracing.intervals import Spans
from gputriage.tracing.limits import DEFAULT_LIMITS, MAX_NAMES, TraceLimits
from gputriage.tracing.pool import can_fork, workers_for
from gputriage.tracing.reader import TraceHeader
from gputriage.tracing.split import Begun, collect
from gputriage.tracing.store import Run, SpillDir
from gputriage.tracing.sweep import TIME_MIN, Context, Segment, Window, context_of, iterate_windows
from gputriage.wording import counted

F64 = npt.NDArray[np.float64]


def analyse_trace(
    path: Path, rank_hint: int | None = None, jobs: int | None = 1, limits: TraceLimits = DEFAULT_LIMITS
) -> RankTrace:
    """Analyse one Kineto trace file (`.json` or `.json.gz`); see analyse_trace_with_collectives."""
    return analyse_trace_with_collectives(path, rank_hint, jobs, limits)[0]


def analyse_trace_with_collectives(
    path: Path,
    rank_hint: int | None = None,
    jobs: int | None = 1,
    limits: TraceLimits = DEFAULT_LIMITS,
    begun: Begun | None = None,
) -> tuple[RankTrace, Collectives]:
    """Analyse one Kineto trace file (`.json` or `.json.gz`) in bounded memory.

    This is the entry point for `gputriage trace` and for `run --trace`.

    Args:
        path: the trace file.
        rank_hint: the rank to report when the trace has no distributedInfo (e.g. from a folder of rank files).
        jobs: processes for one large plain-JSON file (None: one per CPU core; 1: this process only).
        limits: the bounds on what one file may cost (limits.py).
        begun: pass one over this file, already started in workers (split.begin()), with its own spill folder.

    Raises:
        InputError: the file cannot be read as a PyTorch profiler trace, or nothing in it is usable.
    """
    spill = begun.spill if begun is not None and begun.path == path else SpillDir()
    try:
        collected, header = collect(path, limits, spill, jobs, begun)
        _refuse_when_nothing_is_usable(path, collected)
        ctx = context_of(collected)
        sweep = sweep_timeline(ctx, collected.runs, spill, jobs)
        return sweep.result(collected, header, path, rank_hint), sweep.collectives
    finally:
        spill.cleanup()  # every run file and median file of this analysis, workers' included


def sweep_timeline(
    ctx: Context,
    runs: dict[str, list[Run]],
    spill: SpillDir,
    jobs: int | None,
    *,
    window_rows: int | None = None,
) -> Sweep:
    """Pass two: every accumulator fed the whole timeline, in stretches swept by `jobs` processes where the trace is
    large enough to gain from it and forking is safe, else in one sweep."""
    rows = sum(run.count for per_layout in runs.values() for run in per_layout)
    workers = workers_for(jobs)
    count = segments.segment_count(rows, workers)
    if count < 2 or not can_fork():
        sweep = Sweep(ctx, spill)
        for window in iterate_windows(ctx, runs, window_rows):
            sweep.add(window)
        return sweep
    # The folder exists before the workers fork: their median files go into it, and are removed with it.
    start = partial(Sweep.start, ctx, spill.ready())
    parts = segments.sweep_in_segments(ctx, runs, start, count=count, workers=workers, window_rows=window_rows)
    for part in parts:
        part.ctx = ctx  # a worker sends its sweep back without the context (Sweep.__getstate__), whichever it swept
    return merge_sweeps(parts)


def merge_sweeps(parts: list[Sweep]) -> Sweep:
    """One sweep from the sweeps of consecutive stretches of the timeline."""
    whole = parts[0]
    for later in parts[1:]:
        whole.merge(later)
    return whole


def _without_context(fields: dict[str, Any]) -> Sweep:
    """A sweep a worker sent back; the caller sets its context (sweep_timeline)."""
    return Sweep(ctx=cast("Context", None), **fields)


# ProcessGroupNCCL's record_function names ("nccl:all_reduce"): NCCL runs on CUDA tensors only.
_NCCL_OP_RE = re.compile(r"^nccl:[A-Za-z_]+")


def _cuda_implied_by(names: list[str], backend: str | None) -> str | None:
    """A sign, in what the host recorded, that the job used CUDA: worth saying when the trace holds no device
    event (the profiler then recorded the CPU only)."""
    op = next((name for name in names if _NCCL_OP_RE.match(name)), None)
    if op is not None:
        return f"it runs NCCL collectives ({op})"
    if backend is not None and backend.lower() == "nccl":
        return "its process group uses the nccl backend"
    return None


def _refuse_when_nothing_is_usable(path: Path, col: Collected) -> None:
    """Nothing timed to judge is refused: a report would say "healthy" about a trace that measured nothing."""
    kept = sum(run.count for runs in col.runs.values() for run in runs)
    if kept == 0 and col.dropped:
        reasons = ", ".join(f"{count} {reason}" for reason, count in col.dropped.most_common(3))
        raise InputError(f"{path} has no usable event: every timed event was dropped ({reasons})")
    if kept == 0 and col.unread_events:
        # timed kernels, copies or memsets whose `args` hold no stream: they cannot be placed on a GPU's timeline
        raise InputError(
            f"{path} has nothing to analyse: its {col.unread_events:,} timed events are no op, and no kernel, copy or "
            "memset as the PyTorch profiler writes them (no category it writes, or no `args.stream`): the file was "
            "written by another tool, torch.autograd.profiler's export_chrome_trace, or altered; record with "
            "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])"
        )
    if kept == 0:
        held = {0: "no event", 1: "1 event, not a timed one"}.get(
            col.events, f"{col.events:,} events, none of them timed"
        )
        raise InputError(f"{path} has nothing to analyse: its list of events holds {held} (no op, no kernel)")


class Sweep(msgspec.Struct):
    """Every accumulator, fed window by window."""

    ctx: Context
    spill: SpillDir
    temporal: analysis.Temporal = msgspec.field(default_factory=analysis.Temporal)
    idle: analysis.IdleByStream = msgspec.field(default_factory=analysis.IdleByStream)
    steps: analysis.Steps = msgspec.field(default_factory=analysis.Steps)
    syncs: activity.Syncs = msgspec.field(default_factory=activity.Syncs)
    copies: activity.Copies = msgspec.field(default_factory=activity.Copies)
    graphs: activity.Graphs = msgspec.field(default_factory=activity.Graphs)
    comm: activity.Comm = msgspec.field(default_factory=activity.Comm)
    cpu: activity.CpuCompute = msgspec.field(default_factory=activity.CpuCompute)
    long_gaps: activity.LongGaps = msgspec.field(default_factory=activity.LongGaps)
    collectives: Collectives = msgspec.field(default_factory=Collectives)
    loader_where: activity.LoaderWhere = msgspec.field(default_factory=activity.LoaderWhere)
    tracker: GapTracker = msgspec.field(default_factory=GapTracker)
    forced_cuts: int = 0
    launches: activity.Launches | None = None

    @classmethod
    def start(cls, ctx: Context, spill: SpillDir, segment: Segment) -> Sweep:
        """A sweep that starts at a segment's cut (segments.py), with what a sweep from the start would know there."""
        sweep = cls(ctx, spill)
        if segment.lo != TIME_MIN:
            # Cuts between segments fall inside GPU-busy time: the GPU was busy up to the cut.
            sweep.tracker.last_busy_end = segment.lo if ctx.gpu_rows else None
            sweep.graphs.graph_corr = segment.graph_corr
        return sweep

    def detach(self) -> None:
        """Before a worker sends this sweep back: long columns of values go to files in the shared folder."""
        if self.launches is not None:
            self.launches.to_files()

    def __reduce__(self) -> tuple[Any, ...]:
        # A worker sends its sweep back without the context: the caller has it, and it holds every name.
        fields = {name: getattr(self, name) for name in self.__struct_fields__ if name != "ctx"}
        return _without_context, (fields,)

    def merge(self, later: Sweep) -> None:
        """Continue with the sweep of the next stretch of the timeline (each accumulator's own merge)."""
        self.temporal.merge(later.temporal)
        self.idle.merge(later.idle)
        self.steps.merge(later.steps)
        self.syncs.merge(later.syncs)
        self.copies.merge(later.copies)
        self.graphs.merge(later.graphs)
        self.comm.merge(later.comm)
        self.cpu.merge(later.cpu)
        self.long_gaps.merge(later.long_gaps)
        self.collectives.merge(later.collectives)
        self.loader_where.merge(later.loader_where)
        self.forced_cuts += later.forced_cuts
        if self.launches is None:
            self.launches = later.launches
        elif later.launches is not None:
            self.launches.merge(later.launches)

    def add(self, w: Window) -> None:
        if self.launches is None:
            self.launches = activity.Launches.create(self.spill)
        self.forced_cuts += int(w.forced_cut)
        for accumulator in (self.temporal, self.idle, self.steps, self.syncs, self.copies, self.launches, self.comm):
            accumulator.add(w)
        if self.ctx.gpu_rows:
            self.graphs.add(w)
        self.cpu.add(w)
        self.collectives.add(w)
        self.loader_where.add(w)
        gaps = self.tracker.window(w, self._measure)
        self.syncs.on_gaps(gaps)
        self.launches.on_gaps(gaps)
        self.cpu.on_gaps(gaps)
        self.long_gaps.on_gaps(w, gaps)

    def _measure(self, w: Window, pieces: Spans, starts_gap: npt.NDArray[np.bool_]) -> dict[str, F64]:
        """Per piece of idle GPU time: the additive values that the gap consumers sum over a gap's pieces."""
        lo, hi = pieces.start, pieces.end
        out: dict[str, F64] = {
            "loader": w.dataloader.overlap_each(lo, hi).astype(np.float64),
            "cpu": self.cpu.spans.overlap_each(lo, hi).astype(np.float64),
            "steps": w.steps.overlap_each(lo, hi).astype(np.float64),
        }
        calls = w.spans(w.runtime, w.runtime_sync)
        out["sync_start"] = ((calls.overlap_each(lo, lo + 1) > 0) & starts_gap).astype(np.float64)
        # The activity split only matters for long gaps: pieces that are long, or part of a gap crossing a cut.
        detail = np.flatnonzero((hi - lo >= LONG_GAP_NS) | ~starts_gap | (hi == w.hi))
        claims = claim_activities(w, Spans(lo[detail], hi[detail])) if len(detail) else {}
        for label in (*ACTIVITIES, "claimed"):
            column = np.zeros(len(lo))
            if label in claims:
                column[detail] = claims[label]
            out[label] = column
        return out

    def result(self, col: Collected, header: TraceHeader, path: Path, rank_hint: int | None) -> RankTrace:
        ctx = self.ctx
        step = self.steps.result()
        step_count = step.count if step is not None else 0
        step_total = step.total_ns if step is not None else 0
        assert self.launches is not None
        out = RankTrace(
            rank=header.rank if header.rank is not None else rank_hint,
            device=header.device,
            path=str(path),
            world_size=header.world_size,
            backend=header.backend,
            events=col.events,
            events_dropped=sum(col.dropped.values()),
            gpu_events=ctx.gpu_rows,
            cpu_ops=self.cpu.op_rows,
            launch_calls=self.launches.launch_ns.count,
            unread_events=col.unread_events,
            cuda_implied_by=_cuda_implied_by(ctx.names, header.backend),
        )
        self._fill_temporal(out)
        out.devices = devices_of(col)
        if step is not None:
            out.steps = step.count
            out.step_time_us = round(step.step_time_us, 3)
            out.step_times_us = step.times_us
            out.step_breakdown = step.breakdown
            out.busy_pct_of_steps = step.kernel_pct if ctx.gpu_rows else None
            out.dataloader_pct_of_step = step.dataloader_pct
            out.dataloader_us_per_step = round(step.dataloader_us_per_step, 3)
        out.dataloader_where = self.loader_where.where
        out.syncs = self.syncs.result(ctx, step_count, step_total)
        out.copies = self.copies.result(ctx)
        out.launches = self.launches.result(step_count)
        out.graphs = self.graphs.result(self.temporal.busy_ns) if ctx.gpu_rows else None
        out.comm = self.comm.result(ctx)
        out.cpu_compute = self.cpu.result(ctx, step_total)
        out.gaps = self.long_gaps.result(ctx)
        out.notes = _notes(col, header, self.forced_cuts, len(self.idle.streams) >= analysis.MAX_STREAMS)
        return out

    def _fill_temporal(self, out: RankTrace) -> None:
        window = self.ctx.window_ns
        if window is None:
            return
        t = self.temporal
        out.window_us = round(window / 1000, 3)
        out.busy_pct = analysis.pct(t.busy_ns, window)
        idle = analysis.pct(window - t.busy_ns, window)
        out.idle_pct = round(100.0 - out.busy_pct, 3) if out.busy_pct is not None else idle
        out.compute_pct = analysis.pct(t.compute_ns, window)
        if out.busy_pct is not None and out.compute_pct is not None:
            out.non_compute_pct = round(out.busy_pct - out.compute_pct, 3)
        out.comm_pct = analysis.pct(t.comm_ns, window)
        out.memory_pct = analysis.pct(t.memory_ns, window)
        out.idle_breakdown, out.streams = self.idle.result()


def _notes(col: Collected, header: TraceHeader, forced_cuts: int, many_streams: bool) -> list[str]:
    notes = list(header.notes)
    notes += [f"{counted(count, 'event')} dropped: {reason}" for reason, count in col.dropped.most_common()]
    if col.unread_events:
        # kernels, copies or memsets whose `args.stream` is missing or unreadable (a 5,000-digit number): not on any
        # stream's timeline, and said, where they left no trace of their absence
        notes.append(
            f"{counted(col.unread_events, 'device event')} (kernels, copies or memsets) dropped: no readable "
            "`args.stream`"
        )
    if col.names_overflowed:
        notes.append(f"{col.names_overflowed} distinct event names beyond the first {MAX_NAMES:,} were pooled")
    if col.lanes_overflowed:
        notes.append(f"threads beyond the first {len(col.lanes) - 1:,} were pooled into one")
    if many_streams:
        notes.append(f"only the first {analysis.MAX_STREAMS} streams are listed one by one")
    if forced_cuts:
        notes.append(
            f"{forced_cuts} cuts of the timeline fell in GPU idle time (a very long idle stretch): the op and line of "
            "a gap across a cut come from its last part"
        )
    return notes


def devices_of(col: Collected) -> list[DeviceTime]:
    """Each device's events and time, busiest first, when the trace's process drove more than one."""
    # a device event whose pid is no int or string names no device: not a second GPU
    known = {key: counts for key, counts in col.device_time.items() if key != UNKNOWN_DEVICE}
    if len(known) < 2:
        return []
    rows = [DeviceTime(key, events, round(dur_ns / 1000, 3)) for key, (events, dur_ns) in known.items()]
    return sorted(rows, key=lambda d: -d.time_us)


def rank_from_filename(path: Path) -> int | None:
    return outdir.trace_rank(path)
