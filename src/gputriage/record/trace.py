"""The trace section: per-rank numbers from a PyTorch profiler (Kineto) trace, in docs/contract.md.

The contract fields of RankTrace come first (docs/contract.md: "trace" section); the nested summaries after them are the
evidence that the trace rules read. Every time is in microseconds (`_us`), every share in percent (`_pct`).
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from gputriage.record.inconclusive import Inconclusive

# A trace with no kernel and no launch is CPU-only unless it holds this many timed events that gputriage cannot
# read, and at least this share of its CPU ops. Kineto's own bookkeeping ("overhead": 2-9 per trace in the corpus)
# stays far below; torch_npu's traces hold 1,237-2,669 such events next to 711-860 CPU ops.
UNREAD_MIN_EVENTS = 50
UNREAD_MIN_SHARE = 0.1
# A trace that marks fewer ProfilerSteps than this cannot judge rung 5: a job's first steps warm up (cuDNN's algorithm
# search, the allocator, DataLoader workers starting), and one or two steps show no spread. Its step shares are leads
# (info), and the verdict is "inconclusive" with the command that records enough steps.
TRACE_MIN_STEPS = 3
# Without step marks, the window is judged only when it holds this many device events: the corpus's micro-traces of
# 3-4 kernels (an event-sync example, a truncated inference rank) say nothing about a job; its benchmark harnesses of
# 79 kernels over 13-41 s (99.5% idle) do.
TRACE_MIN_DEVICE_EVENTS = 20
# A trace whose GPU is this busy is healthy at rung 5 (what remains is at most info). Its steps need no spread to be
# judged: warm-up only makes a step slower and idler, so one step kept 99% busy (DeepSeek's published DualPipe
# step) hides no wait for the host.
HEALTHY_BUSY_PCT = 95.0
STEADY_SCHEDULE = "torch.profiler.schedule(wait=1, warmup=2, active=5)"


class IdleBreakdown(msgspec.Struct):
    host_wait_pct: float | None = None
    kernel_wait_pct: float | None = None
    other_pct: float | None = None


class StreamIdle(msgspec.Struct):
    """HTA's idle breakdown for one stream: shares of that stream's idle time."""

    stream: int
    idle_us: float
    host_wait_pct: float
    kernel_wait_pct: float
    other_pct: float


class StepBreakdown(msgspec.Struct):
    """The TensorBoard plugin's step partition: each instant of a step goes to the first category that covers it."""

    kernel_pct: float
    memcpy_pct: float
    memset_pct: float
    runtime_pct: float
    dataloader_pct: float
    cpu_exec_pct: float
    other_pct: float
    # Of kernel_pct: communication kernels (NCCL, RCCL, gloo) with no compute kernel beside them. None: an older record.
    comm_pct: float | None = None


class SyncSite(msgspec.Struct):
    """Where the host blocked on the device: the runtime call, the op around it and the user's line."""

    call: str
    op: str | None
    where: str | None
    count: int
    total_us: float


class SyncSummary(msgspec.Struct):
    calls: int
    blocking_us: float
    calls_per_step: float | None  # the calls that start inside a ProfilerStep, per step (None: no steps)
    blocking_pct_of_steps: float | None  # the time the host is blocked in them inside the steps, of the steps' time
    # GPU idle time that starts while the host sits in a sync call: the queue drained and the host had to refill it.
    # None: the trace holds no device event, so the GPU's idle time was not measured.
    idle_after_sync_us: float | None
    idle_after_sync_pct: float | None
    sites: list[SyncSite] = msgspec.field(default_factory=list)
    # Of `calls`, the copies whose transfer went device-to-host (cudaMemcpyAsync then waited on, hipMemcpyWithStream):
    # they block the host as a sync call does, but a count of the sync calls by name leaves them out.
    copy_calls: int = 0


class CopySummary(msgspec.Struct):
    h2d_count: int
    h2d_bytes: int
    h2d_us: float
    pageable_h2d_count: int
    pageable_h2d_bytes: int
    pageable_h2d_us: float
    pinned_h2d_count: int
    d2h_count: int
    d2h_us: float
    pageable_d2h_count: int
    pageable_h2d_pct_of_window: float | None


class LaunchSummary(msgspec.Struct):
    kernels: int
    kernels_per_step: float | None
    median_kernel_us: float | None
    short_kernel_pct: float | None  # kernels shorter than SHORT_KERNEL_US
    median_launch_us: float | None  # CPU time of one launch call (cudaLaunchKernel ...)
    median_launch_delay_us: float | None  # from the launch call's start to the kernel's start
    idle_in_short_gaps_pct: float | None  # share of GPU idle time in gaps under 100 µs


class GraphSummary(msgspec.Struct):
    graph_launches: int
    graph_kernels: int
    compiled_regions: int  # torch.compile markers on the CPU side
    triton_kernels: int
    unattributed_gpu_us: float  # GPU time that no CPU op can be blamed for (graph replays, no correlation)
    unattributed_gpu_pct: float | None  # of GPU busy time


class CommSummary(msgspec.Struct):
    kernels: int
    comm_us: float
    overlap_us: float  # communication that runs while a compute kernel runs
    overlap_pct: float | None  # of communication time
    comm_pct_of_window: float | None


class CpuComputeSummary(msgspec.Struct):
    """Long ATen ops on the CPU that launched no device work (a loss, metrics or augmentation on CPU tensors)."""

    ops: int
    cpu_compute_us: float
    pct_of_steps: float | None
    gpu_idle_during_us: float | None  # None: the trace holds no device event (the GPU's idle time was not measured)
    gpu_idle_during_pct_of_steps: float | None
    top_ops: list[str] = msgspec.field(default_factory=list)
    where: str | None = None


class IdleGap(msgspec.Struct):
    """One long GPU idle gap, and what the CPU main thread did meanwhile."""

    start_us: float  # from the start of the GPU window
    dur_us: float
    activity: str  # dataloader | sync | optimizer | allocator | cpu-op | python | outside-steps
    op: str | None
    where: str | None


class GapSummary(msgspec.Struct):
    threshold_us: float
    count: int
    total_us: float
    pct_of_window: float | None
    by_activity_us: dict[str, float] = msgspec.field(default_factory=dict)
    top: list[IdleGap] = msgspec.field(default_factory=list)


class DeviceTime(msgspec.Struct):
    """One device's share of a trace whose process drove several (`device_map="auto"`, a model split by hand): the
    busy share is the union over all of them, which says nothing of each one."""

    device: str  # the device events' pid: the device index Kineto writes
    events: int  # kernels, copies and memsets
    time_us: float  # their durations summed (concurrent streams each count)


class RankTrace(msgspec.Struct):
    """One rank's trace summary. A field the trace cannot give is None, never a guess."""

    rank: int | None = None
    device: str | None = None
    path: str | None = None
    steps: int | None = None
    window_us: float | None = None
    busy_pct: float | None = None
    idle_pct: float | None = None
    compute_pct: float | None = None
    non_compute_pct: float | None = None
    idle_breakdown: IdleBreakdown | None = None
    step_time_us: float | None = None
    busy_pct_of_steps: float | None = None
    dataloader_pct_of_step: float | None = None
    # Evidence beyond the contract.
    world_size: int | None = None
    backend: str | None = None
    events: int | None = None
    events_dropped: int | None = None
    gpu_events: int | None = None
    cpu_ops: int | None = None
    launch_calls: int | None = None
    # Timed events in no category gputriage reads and without a stream (tracing/collect.py's Collected.unread_events).
    unread_events: int | None = None
    # A sign that the job used CUDA although the trace may hold no device event ("it runs NCCL collectives
    # (nccl:all_to_all)": NCCL runs on CUDA tensors only); None when the host's side shows none.
    cuda_implied_by: str | None = None
    comm_pct: float | None = None
    memory_pct: float | None = None
    streams: list[StreamIdle] = msgspec.field(default_factory=list)
    step_times_us: list[float] = msgspec.field(default_factory=list)
    dataloader_us_per_step: float | None = None
    step_breakdown: StepBreakdown | None = None
    dataloader_where: str | None = None
    syncs: SyncSummary | None = None
    copies: CopySummary | None = None
    launches: LaunchSummary | None = None
    graphs: GraphSummary | None = None
    comm: CommSummary | None = None
    cpu_compute: CpuComputeSummary | None = None
    gaps: GapSummary | None = None
    # One process, several devices: each one's device time, busiest first (empty for one device)
    devices: list[DeviceTime] = msgspec.field(default_factory=list)
    # Multi-rank: when this rank starts its collectives, relative to the earliest rank (median over collectives).
    collective_lag_us: float | None = None
    # What the reader skipped or capped, one sentence each ("312 events dropped: ts out of range").
    notes: list[str] = msgspec.field(default_factory=list)

    def judged_busy_pct(self) -> float | None:
        """The one busy share a verdict and a comparison rest on: of the steps' time (kernels) when the trace marks
        steps, else of the profiled window (any device work). compare showed the window's 70% beside the finding's
        68.94% for one trace (a trial)."""
        return self.busy_pct_of_steps if self.busy_pct_of_steps is not None else self.busy_pct

    def thin_evidence(self) -> str | None:
        """What the trace holds, when it is too little to judge how busy the GPU keeps ("1 step", "3 kernels, copies
        or memsets"); None when it is enough. With step marks, TRACE_MIN_STEPS of them; without, the window is
        judged, if it holds TRACE_MIN_DEVICE_EVENTS device events."""
        if self.steps and self.step_time_us is not None and self.step_time_us <= 0:
            # marks of no length hold no GPU time to share out: nothing says how busy a step keeps the GPU
            return f"{counted_steps(self.steps)} of zero length"
        if self.steps:
            busy = self.busy_pct_of_steps
            gpu_bound = (
                busy is not None and busy >= HEALTHY_BUSY_PCT and (self.gpu_events or 0) >= TRACE_MIN_DEVICE_EVENTS
            )
            return None if self.steps >= TRACE_MIN_STEPS or gpu_bound else counted_steps(self.steps)
        events = self.gpu_events or 0
        if events and self.window_us is not None and self.window_us <= 0:
            # device events of no length at one instant: no window to be busy in (was HEALTHY, rung 5 passed)
            return f"{events:,} kernels, copies or memsets in a window of no length"
        if events == 0 or events >= TRACE_MIN_DEVICE_EVENTS:
            return None
        return "1 kernel, copy or memset" if events == 1 else f"{events} kernels, copies or memsets"

    def device_not_read(self) -> str | None:
        """Why this trace cannot say where the ops ran although it holds no device event: the device's activity was
        not recorded (kernel launches, no kernel), or it is in a form gputriage does not read (many timed events with
        no known category and no stream: an Ascend NPU's tasks through torch_npu). None: no such sign (a CPU-only
        trace, or one with device events)."""
        if self.gpu_events != 0:  # None: a record that did not count them
            return None
        unread = self._nothing_ran() or self._kernels_unreadable()
        if unread is not None:
            return unread
        if self.launch_calls:
            return (
                f"the trace holds {self.launch_calls:,} kernel launches but no kernel, copy or memset that gputriage "
                "can read: the profiler recorded the CPU only, or the kernels in another form (the CUPTI range "
                "profiler's counters); record with torch.profiler.profile(activities=[ProfilerActivity.CPU, "
                "ProfilerActivity.CUDA]) and no profiler metrics"
            )
        if self.cuda_implied_by:
            return (
                f"the trace holds no kernel and no kernel launch, yet {self.cuda_implied_by}, and NCCL works on "
                "CUDA tensors only: the profiler recorded the CPU only; record with "
                "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])"
            )
        unread_events = self.unread_events or 0
        if unread_events >= UNREAD_MIN_EVENTS and unread_events >= UNREAD_MIN_SHARE * (self.cpu_ops or 0):
            return (
                f"the trace holds {unread_events:,} timed events with no category gputriage knows and no `stream` arg, "
                "and no "
                "device event it can read (Kineto writes CUDA, ROCm and MTIA work with a `stream` arg): another "
                "device's trace, as torch_npu writes them; read it with that device's profiler tools"
            )
        return None

    def _nothing_ran(self) -> str | None:
        """No op, no launch, no device event: nothing in the window says where work would run (trial 10: a trace
        of a few runtime calls was HEALTHY, "no problem in where the ops run")."""
        if self.cpu_ops != 0 or self.launch_calls or self.unread_events:
            return None
        return (
            "the trace holds no operator, no kernel launch and no device event: the profiled window ran no PyTorch "
            "work (it was stopped before the first step, or only its set-up was recorded); profile steps of the "
            "loop (torch.profiler.schedule(wait=1, warmup=1, active=3), prof.step() each iteration)"
        )

    def _kernels_unreadable(self) -> str | None:
        """Kernel launches, and device events that were there but could not be read (no stream, or dropped)."""
        unread = self.unread_events or 0
        if self.launch_calls and unread:
            return (
                f"the trace holds {self.launch_calls:,} kernel launches and {unread:,} device events (kernels, copies "
                "or memsets) whose `args` hold no readable `stream`, so none of them could be placed on the GPU's "
                "timeline: the file was altered or written by another tool; record it again with torch.profiler"
            )
        if self.launch_calls and self.events_dropped:
            dropped = "; ".join(n for n in self.notes if " dropped: " in n) or f"{self.events_dropped:,} events dropped"
            return (
                f"the trace holds {self.launch_calls:,} kernel launches but no kernel, copy or memset that gputriage "
                f"can read, and {dropped}: the kernels are likely among them (the file was altered or written by "
                "another tool); record it again with torch.profiler"
            )
        return None

    def self_check(self) -> list[str]:
        problems = []
        if self.busy_pct is not None and self.idle_pct is not None and abs(self.busy_pct + self.idle_pct - 100) > 0.01:
            problems.append(f"trace rank {self.rank}: busy {self.busy_pct} + idle {self.idle_pct} != 100")
        if (
            self.busy_pct is not None
            and self.compute_pct is not None
            and self.non_compute_pct is not None
            and abs(self.compute_pct + self.non_compute_pct - self.busy_pct) > 0.01
        ):
            problems.append(f"trace rank {self.rank}: compute + non-compute != busy")
        return problems


class RankImbalance(msgspec.Struct):
    """How the ranks of one job compare (filled when several ranks' traces are analysed together)."""

    ranks: int
    busy_pct_min: float | None
    busy_pct_max: float | None
    busy_spread_pct: float | None  # max - min, percentage points
    step_time_us_min: float | None
    step_time_us_max: float | None
    step_time_spread_pct: float | None  # (max - min) / min
    collectives_compared: int
    straggler_rank: int | None
    straggler_lag_us: float | None  # how late the straggler starts its collectives (median)
    straggler_lag_pct_of_step: float | None


class RanksOfWorld(msgspec.Struct, frozen=True):
    """Some ranks of a larger job (TraceSection.ranks_of_world)."""

    given: int
    world: int
    declared: bool  # the traces' world_size; False: at least the highest rank given, plus one
    folder: str | None  # the one folder every rank given came from; None: several, or no path

    def of_the_job(self) -> str:
        """'2 of the job's 128 ranks' or '2 of the job's 6 or more ranks'."""
        return f"{self.given} of the job's {self.world}{self._bound()} ranks"

    def not_given(self) -> str:
        """'126' or '4 or more': the ranks the traces leave out."""
        return f"{self.world - self.given}{self._bound()}"

    def _bound(self) -> str:
        return "" if self.declared else " or more"  # the highest rank only bounds the job's size from below


class TraceSection(msgspec.Struct):
    ranks: list[RankTrace] = msgspec.field(default_factory=list)
    imbalance: RankImbalance | None = None
    # `run --trace`: why the profiler window gave no trace (never raised into the job), or that the job ended inside it
    note: str | None = None
    # Files found in a folder of rank traces that are not traces at all ("skipped config.json: is not a PyTorch
    # profiler trace (no traceEvents list found)"); a broken trace is never skipped: it stops the command.
    skipped: list[str] = msgspec.field(default_factory=list)

    def measured_rungs(self) -> set[int]:
        if not self.ranks:
            return set()
        if self._device_work():
            return {4} if self.too_thin() is not None else {4, 5}
        # how busy the GPU is needs a kernel on it: a CPU-only trace answers rung 4 (nothing ran there), not rung 5
        return set() if self._device_not_read() is not None else {4}

    def unmeasured_rungs(self) -> dict[int, str]:
        if self.ranks:
            if self._device_work():
                thin = self.too_thin()
                several = len(self.ranks) > 1 and thin is not None and thin.rank is not None
                return {} if thin is None else {5: _too_thin_reason(thin, thin.rank if several else None)}
            why = self._device_not_read()
            return {4: why, 5: why} if why else {5: "the trace holds no kernel on any accelerator (a CPU-only trace)"}
        reason = f"the profiler trace gave nothing ({self.note})" if self.note else "the profiler trace gave nothing"
        return {4: reason, 5: reason}

    def ranks_of_world(self) -> RanksOfWorld | None:
        """How many of the job's ranks the traces are, when they are some only: the traces' world_size (2 of 128),
        or, where no trace says it, the highest rank (ranks 0 and 5: at least 6). What the ranks show is then
        measured on those only, and a straggler among the rest cannot be seen. None when every rank is here, when
        nothing says the job was larger, or when a trace contradicts its own world size (a rank at or above it: the
        reader notes that, and no count is given)."""
        if not self.ranks:
            return None
        declared = self.declared_world_size()
        ranks = [r.rank for r in self.ranks if r.rank is not None]
        if declared is not None and any(rank >= declared for rank in ranks):
            return None
        given = self.ranks_given()
        world = declared if declared is not None else max(ranks, default=-1) + 1
        if world <= given:
            return None
        folders = {str(Path(r.path).parent) for r in self.ranks if r.path}
        return RanksOfWorld(given, world, declared is not None, folders.pop() if len(folders) == 1 else None)

    def declared_world_size(self) -> int | None:
        """The world size the traces say (distributedInfo.world_size; the largest, where they differ); None where
        none says it."""
        return max((r.world_size for r in self.ranks if r.world_size is not None), default=None)

    def ranks_given(self) -> int:
        """How many ranks the traces are: each rank number once, and each trace that does not say its rank."""
        return len({r.rank for r in self.ranks if r.rank is not None}) + sum(r.rank is None for r in self.ranks)

    def too_thin(self) -> RankTrace | None:
        """The rank with the most evidence, when even it holds too little to judge rung 5 (RankTrace.thin_evidence;
        only ranks with device work count); None when a rank holds enough."""
        working = [r for r in self.ranks if r.gpu_events != 0]
        if not working or any(r.thin_evidence() is None for r in working):
            return None
        return max(working, key=lambda r: (r.steps or 0, r.gpu_events or 0))

    def _device_work(self) -> bool:
        return any(r.gpu_events != 0 for r in self.ranks)  # None: a record that did not count them

    def _device_not_read(self) -> str | None:
        return next((why for r in self.ranks if (why := r.device_not_read()) is not None), None)

    def self_check(self) -> list[str]:
        return [p for r in self.ranks for p in r.self_check()]


def counted_steps(steps: int) -> str:
    return "1 step" if steps == 1 else f"{steps} steps"


def _too_thin_reason(r: RankTrace, rank: int | None = None) -> Inconclusive:
    """Why rung 5 is not judged, from the rank with the most evidence (named where several ranks were read: its
    numbers are its own, not the job's)."""
    what = r.thin_evidence()
    assert what is not None
    if r.steps:
        shown = f"the trace{'' if rank is None else f' of rank {rank}'} marks only {what}"
        if r.busy_pct_of_steps is not None:
            shown += f" (the GPU runs kernels {r.busy_pct_of_steps:.1f}% of {'it' if r.steps == 1 else 'them'})"
        why = "too few steps to judge" if (r.step_time_us or 0) > 0 else "steps of zero length hold no time to judge"
    else:
        shown = f"the trace{'' if rank is None else f' of rank {rank}'} marks no step and holds only {what}"
        if r.busy_pct is not None and r.window_us is not None:
            shown += f" (busy {r.busy_pct:.1f}% of a {r.window_us / 1000:.1f} ms window)"
        why = "too little to judge"
    return Inconclusive(
        f"{why}: {shown}, and a job's first steps warm up; profile at least {TRACE_MIN_STEPS} steady-state steps: "
        f"torch.profiler.profile(..., schedule={STEADY_SCHEDULE}), with prof.step() after each step"
    )
