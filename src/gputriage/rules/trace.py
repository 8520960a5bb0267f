"""Rules for the trace part of the ladder (see docs/contract.md's finding catalogue).

Each rule reads the `trace` section's per-rank summaries and turns what a profiler trace can prove into a finding.
The thresholds were calibrated on the real traces in ../shared/corpus/traces (see tests/trace/test_corpus.py); each
one's reason sits next to it. A rule flags a cause only when the trace shows it cost GPU time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gputriage.findings import Finding, Severity, explained_pct
from gputriage.record import Run
from gputriage.record.device import NOT_ACCELERATORS, judged_device
from gputriage.record.numbers import pct_text
from gputriage.record.trace import (
    HEALTHY_BUSY_PCT,
    STEADY_SCHEDULE,
    IdleGap,
    RanksOfWorld,
    RankTrace,
    SyncSummary,
    TraceSection,
)
from gputriage.rules.registry import rule
from gputriage.stdlib import shlex

# input-pipeline-bound. The TensorBoard plugin advised on DataLoader time above 5% of the step; its share only
# counts loader time that no kernel, copy or runtime call hides, so 5% of the step is 5% of GPU time lost. In the
# corpus the starved ResNet-50 (num_workers=0) sits at 20.3% and every fed trace at or under 0.1%. From 40% on,
# the GPU waits for data for most of the step (owlv2 on H100: 51%): critical.
LOADER_WARN_PCT = 5.0
LOADER_CRITICAL_PCT = 40.0
# Without ProfilerStep spans: GPU idle gaps of 1 ms+ spent in the DataLoader, as a share of the GPU window, over at
# least a few loader calls (one slow first batch is worker start-up, not a pipeline problem).
LOADER_GAP_WARN_PCT = 10.0
LOADER_MIN_CALLS = 3

# host-sync-in-loop: GPU idle that begins while the host blocks in a sync (the queue ran dry) costs 5% of the
# window or more, and the syncs recur every step. Corpus: 46% on the 16-rank A100 job (21 syncs/step); healthy
# traces stay under 3.3% even with 20 syncs/step (their syncs land when the queue is deep).
SYNC_IDLE_WARN_PCT = 5.0
SYNC_MIN_PER_STEP = 1.0

# launch-bound (HTA's idle breakdown): most idle time is host wait (the CPU had not enqueued the next kernel yet),
# and idle time spread in gaps under 100 µs costs 10%+ of the window, with short kernels. Corpus: the Linear loop
# (23.7% of the window in short gaps), eager B200 inference (31%), V100 DDP training (23%), the A100 DDP control
# trace (11%, 84% busy); the fed ResNet-50 sits at 7.8% and the healthy traces near 0. Below 100 kernels (the
# micro-benchmarks) there is no launch pattern to judge.
LAUNCH_MIN_KERNELS = 100
LAUNCH_HOST_WAIT_PCT = 50.0
LAUNCH_SHORT_GAP_WINDOW_PCT = 10.0
LAUNCH_MEDIAN_KERNEL_US = 20.0
LAUNCH_SHORT_KERNEL_PCT = 30.0

# pageable-memcpy: any pageable host-to-device copy is worth an info (pinning is a one-line change); from 3% of the
# GPU window (the ResNet-50 pair: 1.4% and 2.6%; param ResNet: 4.3%) the slower, host-blocking copies are a warning.
PAGEABLE_WARN_PCT = 3.0

# low-gpu-utilization: the TensorBoard plugin's rule, GPU busy under 50% of the window, when no finding above
# explains the idle time.
LOW_UTIL_PCT = 50.0

# cpu-compute-in-step: long ATen ops on the CPU that launch nothing keep the GPU idle for 10%+ of the step time.
# Corpus: the A100 ResNet DDP trace (12.3%); every other GPU trace is under 2.5%.
CPU_COMPUTE_WARN_PCT = 10.0


def _section(run: Run) -> TraceSection | None:
    return run.trace if run.trace is not None and run.trace.ranks else None


def _rank_of(section: TraceSection, r: RankTrace) -> int | None:
    distributed = len(section.ranks) > 1 or (r.world_size or 1) > 1
    return r.rank if distributed else None


def _ran_on_accelerator(r: RankTrace) -> bool:
    """The trace holds device work (a kernel, copy or memset on some stream): only then may a finding say "GPU"."""
    return r.gpu_events != 0  # None: a record that did not count them


def _judged_busy(r: RankTrace) -> tuple[float | None, str]:
    """The busy share a verdict rests on, and its window: of the steps' time when the trace marks steps (a step that
    spends 218 ms preprocessing video on the CPU before 160 ms of kernels is not 99% busy), else of the profiled
    window, first kernel to last."""
    # of the steps: kernels only (the TensorBoard plugin's GPU utilization); of the window: any device work
    return r.judged_busy_pct(), "of the steps' time" if r.busy_pct_of_steps is not None else "of the profiled window"


def _busy_words(r: RankTrace) -> str:
    """The steps' share counts kernels only (the TensorBoard plugin's GPU utilization); the window's, any device
    work."""
    return "runs kernels" if r.busy_pct_of_steps is not None else "is busy"


def _healthy(r: RankTrace) -> bool:
    busy, _ = _judged_busy(r)
    return busy is not None and busy >= HEALTHY_BUSY_PCT


def _soften(r: RankTrace, severity: Severity) -> Severity:
    """Info on a GPU busy enough, and on a trace too thin to judge a share of its time (one step, a first step that
    warms up): then a lead, as low-gpu-utilization is."""
    return Severity.INFO if _healthy(r) or r.thin_evidence() else severity


def _thin_lead(r: RankTrace) -> str:
    """'From 1 step only: ' (or 'From 3 kernels, copies or memsets only: ') when the trace holds too little to judge
    a share of its time (record/trace.py), else ''. Such a finding is a lead (info), and the verdict is
    inconclusive."""
    thin = r.thin_evidence()
    return f"From {thin} only: " if thin else ""


def _led_by(few: str, title: str) -> str:
    if not few:
        return title
    # lower-case a sentence's first word, never an acronym's first letter ("CPU ops ...", not "cPU ops ...")
    first = title.split(" ", 1)[0]
    return few + (title if first[1:2].isupper() else title[0].lower() + title[1:])


def _suffix(section: TraceSection, r: RankTrace) -> str:
    rank = _rank_of(section, r)
    return f" on rank {rank}" if rank is not None else ""


# ---- per-rank checks (pure; low-gpu-utilization and straggler-rank reuse them) ----


def no_gpu_compute(section: TraceSection, r: RankTrace) -> Finding | None:
    if (r.gpu_events or 0) > 0 or not r.cpu_ops or r.device_not_read() is not None:
        # Launch calls but no device event (the profiler did not record the device), or many timed events in a form
        # not read (torch_npu's device tasks): that proves nothing about where the work ran; rungs 4 and 5 say so.
        return None
    return Finding(
        code="no-gpu-compute",
        rung=4,
        severity=Severity.CRITICAL,
        # "steps" only where the trace marks them: a profile of a few ops is not a training step
        title=f"The profiled {'steps' if r.steps else 'window'} ran no kernel on any accelerator{_suffix(section, r)}",
        evidence={
            "cpu_ops": r.cpu_ops,
            "gpu_events": 0,
            "launch_calls": 0,
            "steps": r.steps,
            "step_time_us": r.step_time_us,
        },
        fix=(
            "# the trace holds no kernel, no copy and no CUDA runtime call. If the job already moves its model and "
            "data (.cuda() / .to('cuda')), the profiler recorded the CPU only: profile with "
            "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] on a torch whose "
            "torch.cuda.is_available() is True. Otherwise put the work on the GPU:\n"
            "device = torch.device('cuda'); model.to(device); and in the loop: inputs, labels = "
            "inputs.to(device), labels.to(device)  # check torch.cuda.is_available() first"
        ),
        where=None,
        rank=_rank_of(section, r),
    )


def input_pipeline_bound(section: TraceSection, r: RankTrace) -> Finding | None:
    share = r.dataloader_pct_of_step
    evidence: dict[str, object]
    if share is not None:
        if share < LOADER_WARN_PCT:
            return None
        severity = Severity.CRITICAL if share >= LOADER_CRITICAL_PCT else Severity.WARNING
        few = _thin_lead(r)
        if few or r.device_not_read() is not None:
            # A share from one or two steps is a lead, not a finding (they may be warm-up); so is one from a trace
            # whose device work was not recorded (launches, no kernel): whether the GPU waited too is not known.
            severity = Severity.INFO
        evidence = {
            "dataloader_pct_of_step": share,
            "dataloader_us_per_step": r.dataloader_us_per_step,
            "step_time_us": r.step_time_us,
            "busy_pct_of_steps": r.busy_pct_of_steps,
            "steps": r.steps,
        }
        title = _led_by(
            few,
            f"The GPU waits for the DataLoader {share:.1f}% of each step{_suffix(section, r)}"
            if _ran_on_accelerator(r)
            # A trace without any device kernel says nothing about a GPU: the loop itself waits.
            else f"Each step waits for the DataLoader {share:.1f}% of its time{_suffix(section, r)}",
        )
    else:
        gaps = r.gaps
        loader_us = gaps.by_activity_us.get("dataloader", 0.0) if gaps is not None else 0.0
        loader_calls = sum(1 for g in gaps.top if g.activity == "dataloader") if gaps is not None else 0
        if r.window_us is None or gaps is None or loader_calls < LOADER_MIN_CALLS:
            return None
        share_of_window = 100.0 * loader_us / r.window_us
        if share_of_window < LOADER_GAP_WARN_PCT:
            return None
        severity = Severity.CRITICAL if share_of_window >= LOADER_CRITICAL_PCT else Severity.WARNING
        evidence = {
            "dataloader_idle_us": loader_us,
            "dataloader_idle_pct_of_window": round(share_of_window, 3),
            "of_10_longest_gaps_in_dataloader": loader_calls,
            "window_us": r.window_us,
        }
        title = f"The GPU sits idle in the DataLoader for {share_of_window:.1f}% of the trace{_suffix(section, r)}"
    pinned = r.copies is not None and r.copies.pinned_h2d_count > 0
    return Finding(
        code="input-pipeline-bound",
        rung=5,
        severity=_soften(r, severity),
        title=title,
        evidence=evidence,
        fix=(
            "DataLoader(dataset, batch_size=..., num_workers=8, persistent_workers=True, prefetch_factor=4"
            + ("" if pinned or not _ran_on_accelerator(r) else ", pin_memory=True")
            + (
                ")  # num_workers ~ CPU cores per GPU; move decoding/augmentation to the workers or the GPU"
                if _ran_on_accelerator(r)
                else ")  # num_workers ~ free CPU cores; move decoding/augmentation into the workers"
            )
        ),
        where=r.dataloader_where,
        rank=_rank_of(section, r),
    )


def host_sync_in_loop(section: TraceSection, r: RankTrace) -> Finding | None:
    s = r.syncs
    if s is None or s.idle_after_sync_pct is None or s.idle_after_sync_pct < SYNC_IDLE_WARN_PCT:
        return None
    recurring = s.calls_per_step >= SYNC_MIN_PER_STEP if s.calls_per_step is not None else s.calls >= 3
    if not recurring:
        return None
    top = s.sites[0] if s.sites else None
    searched = _autotune_share(s)
    if searched >= AUTOTUNE_SHARE:
        return _autotune(section, r, s, searched)
    culprit = f" in {top.op}" if top is not None and top.op else ""
    return Finding(
        code="host-sync-in-loop",
        rung=4,
        severity=_soften(r, Severity.WARNING),
        title=_led_by(
            _thin_lead(r),
            f"The host blocks on the GPU{culprit} and the GPU then idles {s.idle_after_sync_pct:.1f}% of the "
            f"time{_suffix(section, r)}",
        ),
        evidence={
            "sync_calls": s.calls,
            "blocking_copy_calls": s.copy_calls,  # of sync_calls: device-to-host copies, not sync calls by name
            "sync_calls_per_step": s.calls_per_step,
            "blocking_us": s.blocking_us,
            "idle_after_sync_us": s.idle_after_sync_us,
            "idle_after_sync_pct": s.idle_after_sync_pct,
            "top_call": top.call if top else None,
            "top_op": top.op if top else None,
        },
        fix=(
            "Keep values on the GPU inside the loop: accumulate `total += loss.detach()` and call `.item()` / "
            "`.cpu()` / `print(tensor)` every N steps; find every sync with "
            "`torch.cuda.set_sync_debug_mode('warn')`"
        ),
        where=top.where if top else None,
        rank=_rank_of(section, r),
    )


# cuDNN's algorithm search (torch.backends.cudnn.benchmark) times each candidate for a new convolution shape with
# CUDA events, waiting on each: the host blocks inside aten::cudnn_convolution*, once per shape, in the first
# iterations (a kineto sample: 357 of 373 waits there, none in the last 5,000 kernels). No user line reads a value.
AUTOTUNE_SHARE = 0.9


def _autotune_share(s: SyncSummary) -> float:
    searched = sum(x.count for x in s.sites if x.op and "cudnn_convolution" in x.op and "Event" in x.call)
    return searched / s.calls if s.calls else 0.0


def _autotune(section: TraceSection, r: RankTrace, s: SyncSummary, share: float) -> Finding:
    return Finding(
        code="host-sync-in-loop",
        rung=4,
        severity=Severity.INFO,
        title=(
            f"The host waits in cuDNN's algorithm search (cudnn.benchmark timing each new convolution shape), "
            f"{share:.0%} of its {s.calls} waits: a one-time cost of the first iterations"
            f"{_suffix(section, r)}"
        ),
        evidence={
            "sync_calls": s.calls,
            "autotune_pct": round(100.0 * share, 1),
            "blocking_us": s.blocking_us,
            "idle_after_sync_pct": s.idle_after_sync_pct,
        },
        fix=(
            "# nothing to change in the loop: profile after the warm-up, so the trace shows the steady state\n"
            f"torch.profiler.profile(schedule={STEADY_SCHEDULE}, ...)"
        ),
        where=None,
        rank=_rank_of(section, r),
    )


def launch_bound(section: TraceSection, r: RankTrace) -> Finding | None:
    launches, ib = r.launches, r.idle_breakdown
    if launches is None or ib is None or r.idle_pct is None or launches.idle_in_short_gaps_pct is None:
        return None
    if launches.kernels < LAUNCH_MIN_KERNELS:
        return None
    lost_pct = r.idle_pct * launches.idle_in_short_gaps_pct / 100.0
    short = (launches.median_kernel_us or 1e9) <= LAUNCH_MEDIAN_KERNEL_US or (
        launches.short_kernel_pct or 0.0
    ) >= LAUNCH_SHORT_KERNEL_PCT
    if lost_pct < LAUNCH_SHORT_GAP_WINDOW_PCT or (ib.host_wait_pct or 0.0) < LAUNCH_HOST_WAIT_PCT or not short:
        return None
    return Finding(
        code="launch-bound",
        rung=4,
        severity=_soften(r, Severity.WARNING),
        title=_led_by(
            _thin_lead(r),
            f"The GPU waits for the CPU to launch many short kernels, losing {lost_pct:.1f}% of the "
            f"time{_suffix(section, r)}",
        ),
        evidence={
            "idle_in_short_gaps_pct_of_window": round(lost_pct, 3),
            "host_wait_pct_of_idle": ib.host_wait_pct,
            "kernels": launches.kernels,
            "kernels_per_step": launches.kernels_per_step,
            "median_kernel_us": launches.median_kernel_us,
            "short_kernel_pct": launches.short_kernel_pct,
            "median_launch_us": launches.median_launch_us,
            "busy_pct": r.busy_pct,
        },
        fix=(
            "model = torch.compile(model, mode='reduce-overhead')  # fuses small ops and replays the step as a "
            "CUDA graph; or raise the batch size so each kernel does more work"
        ),
        where=None,
        rank=_rank_of(section, r),
    )


def pageable_memcpy(section: TraceSection, r: RankTrace) -> Finding | None:
    c = r.copies
    if c is None or c.pageable_h2d_count == 0:
        return None
    share = c.pageable_h2d_pct_of_window or 0.0
    severity = Severity.WARNING if share >= PAGEABLE_WARN_PCT else Severity.INFO
    return Finding(
        code="pageable-memcpy",
        rung=4,
        severity=_soften(r, severity),
        title=f"{c.pageable_h2d_count} host-to-device copies come from pageable memory{_suffix(section, r)}",
        evidence={
            "pageable_h2d_count": c.pageable_h2d_count,
            "pageable_h2d_bytes": c.pageable_h2d_bytes,
            "pageable_h2d_us": c.pageable_h2d_us,
            "pageable_h2d_pct_of_window": c.pageable_h2d_pct_of_window,
            "pinned_h2d_count": c.pinned_h2d_count,
        },
        fix="DataLoader(..., pin_memory=True) and batch.to(device, non_blocking=True)",
        where=None,
        rank=_rank_of(section, r),
    )


def cpu_compute_in_step(section: TraceSection, r: RankTrace) -> Finding | None:
    c = r.cpu_compute
    if c is None or not r.launch_calls or not r.gpu_events:
        # Without launch calls we cannot tell an op that computed on the CPU from one whose device work the
        # profiler did not link (MTIA's runtime, CPU-only traces).
        return None
    share = c.gpu_idle_during_pct_of_steps
    if share is None and r.window_us and c.gpu_idle_during_us is not None:
        share = round(100.0 * c.gpu_idle_during_us / r.window_us, 3)
    if share is None or share < CPU_COMPUTE_WARN_PCT:
        return None
    ops = ", ".join(c.top_ops) or "ATen ops"
    return Finding(
        code="cpu-compute-in-step",
        rung=4,
        severity=_soften(r, Severity.WARNING),
        title=_led_by(
            _thin_lead(r),
            f"CPU ops ({ops}) run inside the step while the GPU idles {share:.1f}% of it{_suffix(section, r)}",
        ),
        evidence={
            "cpu_ops": c.ops,
            "cpu_compute_us": c.cpu_compute_us,
            "cpu_compute_pct_of_steps": c.pct_of_steps,
            "gpu_idle_during_us": c.gpu_idle_during_us,
            "gpu_idle_during_pct": share,
            "top_ops": c.top_ops,
        },
        fix=_DDP_BUFFER_FIX if _ddp_buffer_broadcast(r) else _CPU_OP_FIX,
        where=c.where,
        rank=_rank_of(section, r),
    )


_CPU_OP_FIX = (
    "Create these tensors on the GPU (torch.tensor(..., device=device)) or move them with .to(device) before the op; "
    "keep metrics and losses on the device"
)
# DistributedDataParallel broadcasts the module's buffers (BatchNorm's running statistics) from rank 0 at the start of
# every forward (broadcast_buffers=True): one flat broadcast per bucket, then aten::unflatten_dense_tensors and a copy
# per buffer, on the CPU. HTA's ResNet DDP trace: 15 ms and 7 ms per step inside DistributedDataParallel.forward,
# right after nccl:broadcast, while the GPU idles 12.3% of the step.
_DDP_BUFFER_OPS = ("aten::unflatten_dense_tensors", "aten::flatten_dense_tensors")
_DDP_BUFFER_FIX = (
    "# DDP broadcasts every buffer (BatchNorm's running statistics) from rank 0 before each forward, and unpacks it\n"
    "# on the CPU: let each rank keep its own (the same on every rank with SyncBatchNorm)\n"
    "model = DDP(model, device_ids=[local_rank], broadcast_buffers=False)"
)


def _ddp_buffer_broadcast(r: RankTrace) -> bool:
    """The CPU work in the step is, first of all, DDP unpacking its buffer broadcast."""
    c = r.cpu_compute
    return c is not None and bool(c.top_ops) and c.top_ops[0] in _DDP_BUFFER_OPS


_EXPLAINING: tuple[Callable[[TraceSection, RankTrace], Finding | None], ...] = (
    no_gpu_compute,
    host_sync_in_loop,
    launch_bound,
    cpu_compute_in_step,
    input_pipeline_bound,
)


def _explained_pct(f: Finding) -> float:
    """What share of the window an explaining finding accounts for, by its evidence (no-gpu-compute: all of it)."""
    if f.code == "no-gpu-compute":
        return 100.0
    share = explained_pct(f)
    return share if share is not None else 0.0


def low_gpu_utilization(section: TraceSection, r: RankTrace) -> Finding | None:
    busy, window = _judged_busy(r)
    if busy is None or busy >= LOW_UTIL_PCT:
        return None
    explaining = [
        f for check in _EXPLAINING if (f := check(section, r)) is not None and f.severity is not Severity.INFO
    ]
    # Said by the findings that explain it, unless they account for under half of the idle time: a sync after which
    # the GPU idles 13% does not explain a GPU idle 81% of the time.
    if explaining and sum(_explained_pct(f) for f in explaining) >= (100.0 - busy) / 2:
        return None
    gaps = r.gaps
    by_activity = gaps.by_activity_us if gaps is not None else {}
    top_activity = max(by_activity, key=lambda k: by_activity[k]) if by_activity else None
    few = _thin_lead(r)
    finding = Finding(
        code="low-gpu-utilization",
        rung=5,
        severity=Severity.INFO if few else Severity.WARNING,
        title=_led_by(few, f"The GPU {_busy_words(r)} only {pct_text(busy)} {window}{_suffix(section, r)}"),
        evidence={
            "busy_pct": r.busy_pct,
            "busy_pct_of_steps": r.busy_pct_of_steps,
            "idle_pct": r.idle_pct,
            "window_us": r.window_us,
            "long_gaps": gaps.count if gaps is not None else None,
            "long_gaps_pct_of_window": gaps.pct_of_window if gaps is not None else None,
            "long_gap_activity_us": by_activity,
            "main_thread_in_gaps": top_activity,
        },
        fix=_gap_fix(r, top_activity),
        where=gaps.top[0].where if gaps is not None and gaps.top else None,
        rank=_rank_of(section, r),
    )
    if gaps is not None and gaps.top:  # the longest gaps themselves: report.json has them all, the terminal these
        finding.evidence["longest_gaps"] = [_gap_text(g) for g in gaps.top[:_SHOWN_GAPS]]
    return finding


_SHOWN_GAPS = 3

# One process driving several devices: a device with under this share of the busiest one's device time sits idle
# while the others work (a model split across GPUs runs its parts one after another).
IDLE_DEVICE_SHARE_PCT = 10.0
_SHOWN_DEVICES = 8


def gpus_idle_in_process(section: TraceSection, r: RankTrace) -> Finding | None:
    """Several GPUs in one process' trace: the busy share is their union, so 7 idle GPUs beside a busy one read
    "busy 60%"; each one's device time says which wait."""
    if len(r.devices) < 2:
        return None
    busiest = r.devices[0]
    if busiest.time_us <= 0:
        return None
    shares = {d.device: round(100.0 * d.time_us / busiest.time_us, 1) for d in r.devices}
    idle = [d for d in r.devices if shares[d.device] < IDLE_DEVICE_SHARE_PCT]
    listed = ", ".join(f"{d.device}: {d.time_us / 1000:.2f} ms" for d in r.devices[:_SHOWN_DEVICES])
    more = len(r.devices) - _SHOWN_DEVICES
    # each device's own time over the window: an upper bound of its busy share (concurrent streams count twice), so
    # a low one is low for sure
    own = {d.device: min(100.0, round(100.0 * d.time_us / r.window_us, 1)) for d in r.devices} if r.window_us else {}
    evidence: dict[str, object] = {
        "devices": len(r.devices),
        "device_time_ms": listed + (f" and {more} more" if more > 0 else ""),
        "busy_pct": r.busy_pct,
        "idle_devices": [d.device for d in idle],
        "device_pct_of_window": dict(list(own.items())[:_SHOWN_DEVICES]) or None,
    }
    pooled = (
        f"the busy share, {pct_text(r.busy_pct)}, pools them" if r.busy_pct is not None else "the busy share pools them"
    )
    waiting: str | None = None  # why the devices wait, when they do
    if idle:
        waiting = (
            f"{len(idle)} of the {len(r.devices)} devices this process drove ran at most "
            f"{pct_text(max(shares[d.device] for d in idle))} of device {busiest.device}'s device time: they wait "
            f"while it works; {pooled}"
        )
    elif own and max(own.values()) < LOW_UTIL_PCT <= (r.busy_pct or 0.0):
        # the pooled share passes where every device's own share fails (two GPUs taking turns at 35% each read
        # "busy 70%", HEALTHY: trial 10)
        shown = ", ".join(f"{device}: {pct_text(v)}" for device, v in list(own.items())[:_SHOWN_DEVICES])
        waiting = (
            f"This process drove {len(r.devices)} devices, and each one's own kernels cover at most "
            f"{pct_text(max(own.values()))} of the window ({shown}); {pooled}"
        )
    if waiting is not None:
        title = _led_by(_thin_lead(r), waiting)
        # not softened on a high busy share: that share is the pooled one this finding says misleads
        severity = Severity.INFO if r.thin_evidence() else Severity.WARNING
        fix = _SPLIT_MODEL_FIX
    else:
        title = f"This process drove {len(r.devices)} devices; {pooled}, so each one's own busy share is lower"
        severity = Severity.INFO
        fix = "# each device's own time is in device_time_ms; profile with one process per GPU to judge each"
    return Finding(
        code="gpus-idle-in-process",
        rung=5,
        severity=severity,
        title=title,
        evidence=evidence,
        fix=fix,
        rank=_rank_of(section, r),
    )


_SPLIT_MODEL_FIX = (
    '# one process runs the model\'s parts on several GPUs (device_map="auto", layers placed by hand): they\n'
    "# run one after another, so each GPU waits for the others. When the model fits one GPU, run one\n"
    "# process per GPU with DDP (torchrun --nproc_per_node=N train.py); when it does not, shard it with\n"
    "# FSDP, or pipeline micro-batches across the GPUs (torch.distributed.pipelining)"
)


def _gap_fix(r: RankTrace, activity: str | None) -> str:
    """The fix for what the main thread did in the long gaps; the sync's own copy and line where it is one."""
    if activity == "cpu-op" and _ddp_buffer_broadcast(r):
        return _DDP_BUFFER_FIX
    copy = _sync_copy_fix(r) if activity == "sync" else None
    return copy or _GAP_FIXES.get(activity or "", _GAP_FIX_OTHER)


_COPY_OPS = ("aten::copy_", "aten::to", "aten::_to_copy", "aten::cpu")


def _sync_copy_fix(r: RankTrace) -> str | None:
    """Where the host's longest wait is a copy back to the host (sglang's decode: hipMemcpyWithStream in copy_), that
    copy and its line; None for a scalar read (.item()), whose fix is the logging one."""
    top = r.syncs.sites[0] if r.syncs is not None and r.syncs.sites else None
    if top is None or top.op not in _COPY_OPS:
        return None
    at = f" at {top.where}" if top.where else ""
    return (
        f"# The host waits in a copy back from the GPU ({top.call} in {top.op}{at}), and the GPU has nothing queued\n"
        "# meanwhile: copy results back less often, or into pinned memory without waiting, and wait on an event\n"
        "# only where the values are needed:\n"
        "host = torch.empty_like(out, device='cpu', pin_memory=True)\n"
        "host.copy_(out, non_blocking=True); done = torch.cuda.Event(); done.record()  # later: done.synchronize()"
    )


def _gap_text(gap: IdleGap) -> str:
    """'126.1 ms at +836.5 ms (dataloader)': how long, when (from the GPU window's start), what the main thread did."""
    return f"{gap.dur_us / 1000:.1f} ms at +{gap.start_us / 1000:.1f} ms ({gap.activity})"


# The fix follows what the CPU's main thread did in the GPU's long idle gaps (the finding's main_thread_in_gaps).
_STEADY_WINDOW = f"profile a window of steady-state steps: {STEADY_SCHEDULE.removeprefix('torch.profiler.')}"
_GAP_FIXES = {
    "dataloader": (
        "# The GPU waits for the next batch: load it in worker processes, ready before the step asks for it\n"
        "loader = DataLoader(dataset, batch_size=..., num_workers=8, pin_memory=True, persistent_workers=True)"
    ),
    "sync": (
        "# The host blocks on the GPU (.item(), .cpu(), print(tensor)), so nothing is queued behind it\n"
        "loss_value = loss.detach()  # read it (.item()) only every N steps, when you log"
    ),
    "optimizer": (
        "# The optimizer step runs op by op on the host: fuse it\n"
        "optimizer = torch.optim.AdamW(model.parameters(), lr=..., fused=True)  # or foreach=True"
    ),
    "allocator": (
        "# cudaMalloc/cudaFree while the GPU waits: the caching allocator misses (shapes that change from step to\n"
        f"# step), or the job was still warming up (its first steps allocate): {_STEADY_WINDOW}; if it stays,\n"
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py"
    ),
    "runtime": (
        "# The host sits inside a kernel launch while the GPU waits: the first use of a kernel or library (lazy\n"
        "# module loading, cuDNN/cuBLAS set-up) pays it once. At start-up, it is no step's cost:\n"
        f"# {_STEADY_WINDOW}; or pay it before the loop: CUDA_MODULE_LOADING=EAGER python train.py"
    ),
    "cpu-op": (
        "# CPU ops run in the step while the GPU waits: create those tensors on the device, or move the work into\n"
        "# the DataLoader's workers"
    ),
    "python": (
        "# The host runs no recorded op while the GPU waits: Python between the ops (logging, metrics, per-sample\n"
        f"# loops); batch that work or do it every N steps, then {_STEADY_WINDOW}"
    ),
    "outside-steps": f"# The idle time lies outside the ProfilerSteps (start-up, evaluation, saving): {_STEADY_WINDOW}",
}
_GAP_FIX_OTHER = f"# Raise the batch size (more work per kernel launch), or {_STEADY_WINDOW}"


def findings_for_rank(section: TraceSection, r: RankTrace) -> list[Finding]:
    """Every per-rank trace finding for one rank (used by straggler-rank to say why a rank is late)."""
    checks = (*_EXPLAINING, pageable_memcpy, low_gpu_utilization)
    return [f for check in checks if (f := check(section, r)) is not None]


# A run meant for the CPU (or for meta, which has no kernels) has no GPU to keep busy: its trace describes a CPU run,
# whose step phases and op census the run's own rules already judge (NOT_ACCELERATORS).


def _per_rank(check: Callable[[TraceSection, RankTrace], Finding | None]) -> Callable[[Run], Iterable[Finding]]:
    def found(section: TraceSection, r: RankTrace) -> list[Finding]:
        finding = check(section, r)
        return [finding] if finding is not None else []

    found.__name__, found.__doc__ = check.__name__, check.__doc__
    return _per_rank_all(found)


def _per_rank_all(check: Callable[[TraceSection, RankTrace], list[Finding]]) -> Callable[[Run], Iterable[Finding]]:
    """The rule that runs `check` on each rank of a trace judged for an accelerator."""

    def run_rule(run: Run) -> Iterable[Finding]:
        section = _section(run)
        if section is None or judged_device(run) in NOT_ACCELERATORS:
            return []
        return [f for r in section.ranks for f in check(section, r)]

    run_rule.__name__ = f"trace_{check.__name__}"
    run_rule.__doc__ = check.__doc__
    return run_rule


def host_side_causes(section: TraceSection, r: RankTrace) -> list[Finding]:
    """The host-side causes of GPU idle time (a sync, launch overhead, CPU ops in the step), the one that explains
    most of it first: a sync after which the GPU idles 5% does not lead a CPU op that leaves it idle 18% of the step
    (trial 10). Their causal order breaks ties."""
    found = [f for check in _HOST_SIDE if (f := check(section, r)) is not None]
    return sorted(found, key=lambda f: -_explained_pct(f))


_HOST_SIDE = (host_sync_in_loop, launch_bound, cpu_compute_in_step)


# Registration order is the causal tie-break within one severity and rung.
rule(_per_rank(no_gpu_compute))
rule(_per_rank_all(host_side_causes))
for _check in (
    pageable_memcpy,
    input_pipeline_bound,
    low_gpu_utilization,
    gpus_idle_in_process,
):
    rule(_per_rank(_check))


# straggler-rank: a rank that starts its collectives late by 5% of the step (or 1 ms without steps) makes every
# other rank wait inside the collective for that long.
STRAGGLER_LAG_PCT_OF_STEP = 5.0
STRAGGLER_LAG_US = 1000.0
# Fewer collectives than this, or ranks each too thin to judge, make the lag a lead (info): one warm-up all-reduce
# of a toy script measures only how far apart the processes started (a trial's 2-rank folder).
STRAGGLER_MIN_COLLECTIVES = 3


@rule
def trace_straggler_rank(run: Run) -> Iterable[Finding]:
    section = _section(run)
    imbalance = section.imbalance if section is not None else None
    if section is None or imbalance is None or imbalance.straggler_rank is None or imbalance.straggler_lag_us is None:
        return []
    lag_pct = imbalance.straggler_lag_pct_of_step
    late = (
        lag_pct >= STRAGGLER_LAG_PCT_OF_STEP if lag_pct is not None else imbalance.straggler_lag_us >= STRAGGLER_LAG_US
    )
    if not late:
        return []
    straggler = next((r for r in section.ranks if r.rank == imbalance.straggler_rank), None)
    if straggler is None:
        return []
    # An info finding (a few µs of pageable copies) cannot explain a rank that is milliseconds late.
    own = [
        f
        for f in findings_for_rank(section, straggler)
        if f.code != "low-gpu-utilization" and f.severity is not Severity.INFO
    ]
    others = {f.code for r in section.ranks if r is not straggler for f in findings_for_rank(section, r)}
    specific = [f for f in own if f.code not in others]
    reason: Finding | None = (specific or own)[0] if (specific or own) else None
    if reason is None:
        why = ""
    elif specific:
        why = f": {reason.code} on rank {straggler.rank} only"
    else:
        why = f": {reason.code}"
    of_world = section.ranks_of_world()
    among = f" ({of_world.of_the_job()} given)" if of_world is not None else ""
    fix = (
        reason.fix
        if reason is not None
        else f"Compare rank {straggler.rank}'s trace with another rank's: its input pipeline, host syncs and CPU work"
    )
    if of_world is not None:
        # A slower rank may be among those not given: the straggler named here is only the latest of these.
        fix += (
            f"\n# Only {of_world.of_the_job()} were given: a later one may be among the rest; with every rank's "
            f"trace in one folder:\n{_all_ranks_command(of_world)}"
        )
    compared = imbalance.collectives_compared
    few = compared < STRAGGLER_MIN_COLLECTIVES or all(r.thin_evidence() for r in section.ranks)
    lead = f"From {compared} collective{'s' if compared != 1 else ''} only: " if few else ""
    title = (
        f"Rank {straggler.rank} is late to the collectives by {imbalance.straggler_lag_us / 1000:.1f} ms and "
        f"the other ranks wait for it{why}{among}"
    )
    return [
        Finding(
            code="straggler-rank",
            rung=5,
            severity=Severity.INFO if few else Severity.WARNING,
            title=_led_by(lead, title),
            evidence={
                "straggler_rank": straggler.rank,
                "collective_lag_us": imbalance.straggler_lag_us,
                "lag_pct_of_step": lag_pct,
                "collectives_compared": imbalance.collectives_compared,
                "reason_code": reason.code if reason is not None else None,
                "reason_evidence": reason.evidence if reason is not None else None,
                "busy_pct_min": imbalance.busy_pct_min,
                "busy_pct_max": imbalance.busy_pct_max,
                "step_time_spread_pct": imbalance.step_time_spread_pct,
                "ranks_given": section.ranks_given(),
                "world_size": section.declared_world_size(),  # what the traces say, never a guess
            },
            fix=fix,
            where=reason.where if reason is not None else None,
            rank=straggler.rank,
        )
    ]


# communication-bound: the GPU runs collectives (NCCL, RCCL, gloo) with no compute kernel beside them for a quarter of
# the step or more. GPU "busy" counts those kernels, so nvidia-smi and the busy share look fine while the job waits on
# the network or on another rank. Corpus: the 8-rank MI300X ResNet (TraceLens measured 67.8% exposed communication)
# sits at 66% of the step; the DDP traces that overlap their all-reduce with the backward stay at 9-21% (info from
# 10%: worth knowing, not the bottleneck).
COMM_WARN_PCT = 25.0
COMM_INFO_PCT = 10.0


def communication_bound(section: TraceSection, r: RankTrace) -> Finding | None:
    steps_share = r.step_breakdown.comm_pct if r.step_breakdown is not None else None
    share, window = (steps_share, "of the step") if steps_share is not None else (r.comm_pct, "of the profiled window")
    if share is None or share < COMM_INFO_PCT or not _ran_on_accelerator(r):
        return None
    few = _thin_lead(r)
    severity = Severity.WARNING if share >= COMM_WARN_PCT and not few else Severity.INFO
    comm = r.comm
    return Finding(
        code="communication-bound",
        rung=5,
        severity=severity,
        title=_led_by(
            few,
            f"The GPU waits on communication with no compute beside it {share:.1f}% {window}{_suffix(section, r)}",
        ),
        evidence={
            "exposed_comm_pct_of_steps": steps_share,
            "exposed_comm_pct_of_window": r.comm_pct,
            "compute_pct": r.compute_pct,
            "busy_pct": r.busy_pct,
            "comm_kernels": comm.kernels if comm is not None else None,
            "overlap_pct": comm.overlap_pct if comm is not None else None,
            "world_size": r.world_size,
            "backend": r.backend,
            "steps": r.steps,
        },
        fix=_comm_fix(section, r),
        where=None,
        rank=_rank_of(section, r),
    )


def _all_ranks_command(of_world: RanksOfWorld) -> str:
    """The command that compares every rank, in the folder the given ranks came from (where the others go too)."""
    what = "names a straggler, and why it is late"
    if of_world.folder is None:
        return f"gputriage trace ALL_RANKS_FOLDER  # the folder you put them all in: {what}"
    return f"gputriage trace {shlex.quote(of_world.folder)}  # compares the ranks: {what}"


def _comm_fix(section: TraceSection, r: RankTrace) -> str:
    steps: list[list[str]] = []
    if (r.backend or "").lower() == "gloo":
        steps.append(["The trace's backend is gloo: for GPU tensors use dist.init_process_group('nccl')"])
    of_world = section.ranks_of_world()
    if of_world is not None:
        steps.append(
            [
                "A late rank makes every other one wait inside the collective: "
                f"put every rank's trace in one folder ({of_world.of_the_job()} given here)",
                _all_ranks_command(of_world),
            ]
        )
    steps.append(
        [
            "The transport: NCCL over TCP sockets is many times slower than NVLink or InfiniBand/RoCE",
            "NCCL_DEBUG=INFO torchrun ...  # the log says 'NET/IB' or 'NET/Socket', and whether P2P/NVLink is used",
        ]
    )
    steps.append(
        [
            "More compute per collective: a larger batch per GPU, or accumulate gradients without syncing each time",
            "with model.no_sync():  # DDP: every micro-batch but the last skips the all-reduce",
            "    loss.backward()",
        ]
    )
    lines = ["# The collectives take the step, not the compute. In this order:"]
    for number, (why, *code) in enumerate(steps, start=1):
        lines += [f"# {number}. {why}", *code]
    return "\n".join(lines)


rule(_per_rank(communication_bound))
