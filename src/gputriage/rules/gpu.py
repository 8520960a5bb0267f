"""Rung-5 rules on the GPU's own numbers (the `gpu` section, from NVML), and the one-line verdict per GPU.

Thresholds, and where they come from:
- LOW_UTIL_PCT = 50: the TensorBoard profiler plugin flags GPU utilisation below 50%.
- SM_GAP_*: NVML "utilization" is the share of time at least one kernel was resident, so one tiny kernel at a time
  reads 100%. GPM's SM activity is the share of SMs busy. Above 80% util with under 50% SM activity, the GPU is
  "busy" mostly on paper (NVIDIA's DCGM guidance treats SM activity below 50% as room to grow).
- MEMORY_FULL_*: 90% is where PyTorch's caching allocator starts to free and retry (cudaMalloc retries show in
  torch.cuda.memory_stats()["num_alloc_retries"]); 97% leaves less than a typical activation spike.
- THROTTLE_MIN_PCT = 20: a clock event in one sample in five is sustained, not a blip. A power cap only costs time
  when clocks sit below POWER_CAP_CLOCK_PCT of the maximum; busy boards touch their power limit routinely.
- OTHER_PROCESS_*: another process matters once it holds 1 GiB or uses the SMs at all; it is a warning when it holds a
  tenth of the memory or 20% of the SMs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.record.device import judged_for_nvidia
from gputriage.record.gpu import GpuProcess, GpuSample, GpuTrack
from gputriage.record.numbers import util_text
from gputriage.rules.registry import rule
from gputriage.wording import counted

GIB = 1024**3
LOW_UTIL_PCT = 50.0
IDLE_UTIL_PCT = 5.0
SM_GAP_UTIL_PCT = 80.0
SM_GAP_ACTIVE_PCT = 50.0
MEMORY_FULL_INFO_PCT = 90.0
MEMORY_FULL_WARN_PCT = 97.0
THROTTLE_MIN_PCT = 20.0
POWER_CAP_CLOCK_PCT = 85.0
OTHER_PROCESS_MIN_BYTES = 1 * GIB
OTHER_PROCESS_WARN_MEMORY_PCT = 10.0
OTHER_PROCESS_WARN_SM_PCT = 20.0
MAX_OTHER_PROCESS_FINDINGS = 3
# A mean over fewer utilisation readings says little about a job (NVML reads a window of 1/6 s to 1 s): borderline.
MIN_UTIL_READINGS = 10

# Clock-event reasons that slow the job, in the words people use.
LIMITING_REASONS = {
    "hw_thermal": "thermal slowdown (hardware)",
    "sw_thermal": "thermal slowdown",
    "hw_power_brake": "power brake (external power supply signal)",
    "hw_slowdown": "hardware slowdown",
    "power_cap": "power cap",
}
# Codes of lower findings that already explain an idle GPU; low-gpu-utilization then stays silent.
EXPLAINS_IDLE_GPU = {"input-pipeline-bound", "ranks-share-gpu"}

MEANING_OF_UTILIZATION = (
    "NVML utilization (nvidia-smi GPU-Util) is the share of time at least one kernel ran; "
    "SM activity (GPM) is the share of the SMs that were busy"
)


# --- helpers other rules (and watch) may use ------------------------------------------------------------------------
def job_tracks(run: Run) -> list[GpuTrack]:
    """The GPUs the job used: those where one of its processes was seen.

    For `watch` without --pid there is no job: every GPU with a process counts.
    """
    if run.gpu is None:
        return []
    mine = [t for t in run.gpu.devices if any(p.is_job for p in t.processes)]
    if mine or run.gpu.job_pids:
        return mine
    return [t for t in run.gpu.devices if t.processes]


def gpu_idle_summary(run: Run) -> dict[str, Any] | None:
    """NVML's numbers on the job's least busy GPU, for any rule to cite; None when it was not idle or not measured.

    E.g. {"gpu": 0, "gpu_name": "NVIDIA A100-SXM4-80GB", "util_mean_pct": 1.2, "util_zero_pct_of_samples": 97.0,
    "util_sample_count": 360, "window_s": 60.0, "job_memory_max_bytes": 12884901888}.
    """
    measured = [t for t in job_tracks(run) if t.summary.util_mean_pct is not None]
    if not measured:
        return None
    track = min(measured, key=lambda t: t.summary.util_mean_pct or 0.0)
    s = track.summary
    if (s.util_mean_pct or 0.0) >= LOW_UTIL_PCT:
        return None
    out: dict[str, Any] = {
        "gpu": track.index,
        "gpu_name": track.name,
        "util_mean_pct": s.util_mean_pct,
        "util_zero_pct_of_samples": s.util_zero_pct_of_samples,
        "util_below_50_pct_of_samples": s.util_below_50_pct_of_samples,
        "util_sample_count": s.util_sample_count,
        "window_s": s.window_s,
    }
    if s.job_memory_max_bytes is not None:
        out["job_memory_max_bytes"] = s.job_memory_max_bytes
    if s.sm_active_mean_pct is not None:
        out["sm_active_mean_pct"] = s.sm_active_mean_pct
    return out


def device_verdict(track: GpuTrack, recent_s: float | None = None) -> str:  # noqa: PLR0911  (states in priority order)
    """One line on what a GPU is doing: "idle: no process", "throttled: power cap (1005 of 1410 MHz)", ...

    `recent_s` judges utilisation on the last seconds of samples (the live view); otherwise the whole window.
    """
    if track.lost:
        return f"lost: {track.error or 'GPU is lost'} (fell off the bus? check `sudo dmesg | grep -i xid`)"
    if track.error:
        return f"unreadable: {track.error}"
    util = _util(track, recent_s)
    holder = _largest(track.processes)
    if util is None:
        who = f"in use by {_who(holder)}" if holder else "no process"
        reason = track.unavailable.get("gpu_util_pct", "not reported")
        return f"{who}; utilisation unavailable ({reason})"
    if util < IDLE_UTIL_PCT:
        if holder is None:
            return "idle: no process"
        held = f" holds {_gib(holder.used_memory_bytes)}" if holder.used_memory_bytes else " has a context"
        more = _more(track.processes)
        return f"idle while {_who(holder)}{held}{more}"
    throttle = _throttle(track)
    if throttle is not None:
        return f"throttled: {throttle}"
    sm = track.summary.sm_active_mean_pct
    if util >= SM_GAP_UTIL_PCT and sm is not None and sm < SM_GAP_ACTIVE_PCT:
        return f"busy on paper: {util:.0f}% util, but only {sm:.0f}% of SMs active"
    busiest = _busiest(track.processes)
    by = f" by {_who(busiest)}" if busiest else ""
    return f"{'busy' if util >= LOW_UTIL_PCT else 'underused'}: {util:.0f}% util{by}"


# --- rules ----------------------------------------------------------------------------------------------------------
@rule
def low_gpu_utilization(run: Run) -> Iterator[Finding]:
    """Low NVML utilisation, or 100% utilisation with idle SMs, when no lower finding explains it."""
    if not _gpu_expected(run):
        return
    for track in job_tracks(run):
        s = track.summary
        if s.util_mean_pct is None:
            continue
        if s.util_mean_pct < LOW_UTIL_PCT:
            yield _low_util_finding(track)  # dropped by `explain_idle_gpu_below` when a lower finding explains it
        elif _sm_gap(track):
            yield _sm_gap_finding(track)


@rule
def gpu_memory_nearly_full(run: Run) -> Iterator[Finding]:
    for track in job_tracks(run):
        s = track.summary
        if s.memory_used_max_pct is None or s.memory_used_max_pct < MEMORY_FULL_INFO_PCT:
            continue
        total = track.memory_total_bytes or 0
        others = sum(p.used_memory_bytes or 0 for p in track.processes if not p.is_job and _has_job(run))
        severity = Severity.WARNING if s.memory_used_max_pct >= MEMORY_FULL_WARN_PCT else Severity.INFO
        evidence: dict[str, Any] = {
            "gpu": track.index,
            "gpu_name": track.name,
            "memory_used_max_bytes": s.memory_used_max_bytes,
            "memory_total_bytes": total,
            "memory_used_max_pct": s.memory_used_max_pct,
        }
        if s.job_memory_max_bytes is not None:
            evidence["job_memory_max_bytes"] = s.job_memory_max_bytes
        if others:
            evidence["other_processes_memory_bytes"] = others
        yield Finding(
            code="gpu-memory-nearly-full",
            rung=5,
            severity=severity,
            title=(
                f"GPU {track.index}'s memory was {s.memory_used_max_pct:.0f}% full "
                f"({_gib(s.memory_used_max_bytes)} of {_gib(total)})"
            ),
            evidence=evidence,
            fix=_MEMORY_FIX,
        )


@rule
def gpu_throttled(run: Run) -> Iterator[Finding]:
    for track in job_tracks(run):
        shares = track.summary.throttle_pct_of_samples
        limiting = {r: p for r, p in shares.items() if r in LIMITING_REASONS and p >= THROTTLE_MIN_PCT}
        if not limiting:
            continue
        # The most frequent reason; on a tie the most specific one (LIMITING_REASONS is ordered that way).
        order = list(LIMITING_REASONS)
        reason = max(limiting, key=lambda r: (limiting[r], -order.index(r)))
        clock_pct = _clock_pct(track)
        mild_power_cap = set(limiting) == {"power_cap"} and (clock_pct is None or clock_pct >= POWER_CAP_CLOCK_PCT)
        s = track.summary
        evidence: dict[str, Any] = {
            "gpu": track.index,
            "gpu_name": track.name,
            "reason": reason,
            "throttled_pct_of_samples": limiting[reason],
            "reasons_pct_of_samples": limiting,
            "sm_clock_mean_mhz": s.sm_clock_mean_mhz,
            "max_sm_clock_mhz": track.max_sm_clock_mhz,
            "clock_pct_of_max": clock_pct,
            "power_mean_w": s.power_mean_w,
            "power_limit_w": track.power_limit_w,
            "temperature_max_c": s.temperature_max_c,
        }
        clocks = f" (SM clock {s.sm_clock_mean_mhz:.0f} of {track.max_sm_clock_mhz} MHz)" if clock_pct else ""
        yield Finding(
            code="gpu-throttled",
            rung=5,
            severity=Severity.INFO if mild_power_cap else Severity.WARNING,
            title=(
                f"GPU {track.index} was slowed by its {LIMITING_REASONS[reason]} "
                f"in {limiting[reason]:.0f}% of samples{clocks}"
            ),
            evidence={k: v for k, v in evidence.items() if v is not None},
            fix=_THROTTLE_FIX["power" if reason in ("power_cap", "hw_power_brake") else "thermal"].format(
                i=track.index
            ),
        )


@rule
def other_process_on_gpu(run: Run) -> Iterator[Finding]:
    """Processes that are not the job's, on the job's GPUs (only where the job's own PIDs were recognised)."""
    if not _has_job(run):
        return
    found: list[Finding] = []
    for track in job_tracks(run):
        total = track.memory_total_bytes or 0
        job_bytes = sum(p.used_memory_bytes or 0 for p in track.processes if p.is_job)
        for proc in track.processes:
            if proc.is_job:
                continue
            used = proc.used_memory_bytes or 0
            sm = proc.sm_util_pct or 0.0
            if used < OTHER_PROCESS_MIN_BYTES and sm <= 0.0:
                continue
            memory_pct = round(100.0 * used / total, 2) if total else None
            heavy = (memory_pct or 0.0) >= OTHER_PROCESS_WARN_MEMORY_PCT or sm >= OTHER_PROCESS_WARN_SM_PCT
            found.append(_other_process_finding(track, proc, memory_pct, job_bytes, heavy))
    found.sort(key=lambda f: (f.severity.weight, -(f.evidence.get("used_memory_bytes") or 0)))
    yield from found[:MAX_OTHER_PROCESS_FINDINGS]


# --- findings' text -------------------------------------------------------------------------------------------------
_LOW_UTIL_FIX = """\
# Find what the step waits for: the whole ladder on a real run (data wait, host syncs, CPU ops per step)
gputriage run --out gputriage-out/ train.py
# The usual causes, in order: a starved DataLoader, host syncs in the loop, tiny batches
loader = DataLoader(ds, batch_size=..., num_workers=8, pin_memory=True, persistent_workers=True)
loss_value = loss.detach()  # log it every N steps, not .item() every step"""

_SM_GAP_FIX = """\
# The GPU runs one small kernel at a time: give each kernel more work, or fuse kernels
model = torch.compile(model)                      # fuses elementwise kernels
with torch.autocast("cuda", dtype=torch.bfloat16):  # tensor cores (watch tensor_active_mean_pct rise)
    loss = model(x)
# and raise the batch size while memory allows"""

_MEMORY_FIX = """\
# nvidia-smi shows what PyTorch's caching allocator reserved, not what live tensors use: compare
print(torch.cuda.max_memory_allocated() / 2**30, torch.cuda.memory_reserved() / 2**30, "GiB")
print(torch.cuda.memory_stats()["num_alloc_retries"])  # > 0: the allocator ran out and freed/retried
# Fragmentation: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py
# Less memory: a smaller batch with gradient accumulation, or activation checkpointing"""

_THROTTLE_FIX = {
    "power": """\
# Compare the enforced power limit with the board's default; someone may have lowered it
nvidia-smi -i {i} -q -d POWER,PERFORMANCE
sudo nvidia-smi -i {i} -pl <Default Power Limit>   # restore it (needs root; check the cluster's policy)""",
    "thermal": """\
# The GPU is too hot: check fans, airflow and the ambient temperature
nvidia-smi -i {i} -q -d TEMPERATURE,PERFORMANCE
nvidia-smi dmon -i {i} -s pc   # power and clocks per second while the job runs""",
}

_OTHER_FIX = """\
# See who else uses this GPU, then move to a free one (or stop the other job if it is a stale one of yours)
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
CUDA_VISIBLE_DEVICES=<free GPU index> python train.py"""


def _low_util_finding(track: GpuTrack) -> Finding:
    s = track.summary
    evidence: dict[str, Any] = {
        "gpu": track.index,
        "gpu_name": track.name,
        "util_mean_pct": s.util_mean_pct,
        "util_zero_pct_of_samples": s.util_zero_pct_of_samples,
        "util_below_50_pct_of_samples": s.util_below_50_pct_of_samples,
        "util_sample_count": s.util_sample_count,
        "util_source": s.util_source,
        "window_s": s.window_s,
    }
    holder = _largest(track.processes)
    held = ""
    if holder is not None:
        evidence.update(pid=holder.pid, command=holder.command, used_memory_bytes=holder.used_memory_bytes)
        if holder.used_memory_bytes:
            held = f" while {_who(holder)} held {_gib(holder.used_memory_bytes)}"
    if s.sm_active_mean_pct is not None:
        evidence["sm_active_mean_pct"] = s.sm_active_mean_pct
    enough = s.util_sample_count >= MIN_UTIL_READINGS
    title = (
        f"GPU {track.index} was busy {util_text(s.util_mean_pct or 0.0)} of the time "
        f"and at 0% in {s.util_zero_pct_of_samples or 0:.0f}% of samples{held}"
    )
    return Finding(
        code="low-gpu-utilization",
        rung=5,
        severity=Severity.WARNING if enough else Severity.INFO,
        title=title if enough else f"Borderline: {title} (only {counted(s.util_sample_count or 0, 'reading')})",
        evidence={k: v for k, v in evidence.items() if v is not None},
        fix=_LOW_UTIL_FIX,
    )


def _sm_gap_finding(track: GpuTrack) -> Finding:
    s = track.summary
    evidence: dict[str, Any] = {
        "gpu": track.index,
        "gpu_name": track.name,
        "util_mean_pct": s.util_mean_pct,
        "sm_active_mean_pct": s.sm_active_mean_pct,
        "sm_occupancy_mean_pct": s.sm_occupancy_mean_pct,
        "tensor_active_mean_pct": s.tensor_active_mean_pct,
        "dram_active_mean_pct": s.dram_active_mean_pct,
        "meaning": MEANING_OF_UTILIZATION,
    }
    return Finding(
        code="low-gpu-utilization",
        rung=5,
        severity=Severity.WARNING,
        title=(
            f"GPU {track.index} shows {s.util_mean_pct:.0f}% utilization, "
            f"but only {s.sm_active_mean_pct:.0f}% of its SMs were active"
        ),
        evidence={k: v for k, v in evidence.items() if v is not None},
        fix=_SM_GAP_FIX,
    )


def _other_process_finding(
    track: GpuTrack, proc: GpuProcess, memory_pct: float | None, job_bytes: int, heavy: bool
) -> Finding:
    evidence: dict[str, Any] = {
        "gpu": track.index,
        "pid": proc.pid,
        "command": proc.command,
        "used_memory_bytes": proc.used_memory_bytes,
        "memory_pct_of_gpu": memory_pct,
        "sm_util_pct": proc.sm_util_pct,
        "job_memory_bytes": job_bytes,
    }
    holds = f" holds {_gib(proc.used_memory_bytes)}" if proc.used_memory_bytes else " runs"
    uses = f" and uses {proc.sm_util_pct:.0f}% of the SMs" if proc.sm_util_pct else ""
    return Finding(
        code="other-process-on-gpu",
        rung=5,
        severity=Severity.WARNING if heavy else Severity.INFO,
        title=f"Another process, {_who(proc)},{holds} on GPU {track.index}{uses}",
        evidence={k: v for k, v in evidence.items() if v is not None},
        fix=_OTHER_FIX,
    )


# --- small pure helpers ---------------------------------------------------------------------------------------------
def explains_idle_gpu(f: Finding) -> bool:
    """A lower critical/warning finding (or a rung-5 one that starves the GPU) explains why the GPU sits idle."""
    lower = f.rung < 5 and f.severity in (Severity.CRITICAL, Severity.WARNING)
    return lower or (f.code in EXPLAINS_IDLE_GPU and f.severity is not Severity.INFO)


def is_nvml_low_util(f: Finding) -> bool:
    # The NVML rule's finding carries util_source; the trace rules' low-gpu-utilization (busy_pct) is their own.
    return f.code == "low-gpu-utilization" and "util_source" in f.evidence


def _sm_gap(track: GpuTrack) -> bool:
    """NVML calls the GPU busy while GPM says most SMs are not."""
    s = track.summary
    if s.util_mean_pct is None or s.sm_active_mean_pct is None:
        return False
    return s.util_mean_pct >= SM_GAP_UTIL_PCT and s.sm_active_mean_pct < SM_GAP_ACTIVE_PCT


def _gpu_expected(run: Run) -> bool:
    """Utilisation only matters when the job is meant to use an NVIDIA GPU (--expect-device cuda or the default)."""
    return judged_for_nvidia(run)


def _has_job(run: Run) -> bool:
    return bool(run.gpu and any(p.is_job for t in run.gpu.devices for p in t.processes))


def _util(track: GpuTrack, recent_s: float | None) -> float | None:
    if recent_s is not None and track.samples:
        cutoff = track.samples[-1].t_s - recent_s
        recent = [s.gpu_util_pct for s in track.samples if s.t_s >= cutoff and s.gpu_util_pct is not None]
        if recent:
            return sum(recent) / len(recent)
    return track.summary.util_mean_pct


def _throttle(track: GpuTrack) -> str | None:
    shares = track.summary.throttle_pct_of_samples
    limiting = [r for r in LIMITING_REASONS if shares.get(r, 0.0) >= THROTTLE_MIN_PCT]
    if not limiting:
        return None
    clock_pct = _clock_pct(track)
    if limiting == ["power_cap"] and clock_pct is not None and clock_pct >= POWER_CAP_CLOCK_PCT:
        return None
    what = LIMITING_REASONS[limiting[0]]
    if track.summary.sm_clock_mean_mhz is not None and track.max_sm_clock_mhz:
        return f"{what} ({track.summary.sm_clock_mean_mhz:.0f} of {track.max_sm_clock_mhz} MHz)"
    return what


def _clock_pct(track: GpuTrack) -> float | None:
    mean = track.summary.sm_clock_mean_mhz
    if mean is None or not track.max_sm_clock_mhz:
        return None
    return round(100.0 * mean / track.max_sm_clock_mhz, 1)


def _largest(processes: list[GpuProcess]) -> GpuProcess | None:
    if not processes:
        return None
    return max(processes, key=lambda p: (p.is_job, p.used_memory_bytes or 0, -p.pid))


def _busiest(processes: list[GpuProcess]) -> GpuProcess | None:
    """The process using the SMs most, where the driver reports per-process utilisation; else the largest."""
    rated = [p for p in processes if p.sm_util_pct is not None]
    if rated:
        return max(rated, key=lambda p: (p.sm_util_pct or 0.0, -p.pid))
    return _largest(processes)


def _more(processes: list[GpuProcess]) -> str:
    return f" (+{len(processes) - 1} more)" if len(processes) > 1 else ""


def _who(proc: GpuProcess | None) -> str:
    if proc is None:
        return "no process"
    return f"{proc.command or 'a process'} (pid {proc.pid})"


def _gib(n: int | None) -> str:
    return "? GiB" if n is None else f"{n / GIB:.1f} GiB"


def latest(track: GpuTrack) -> GpuSample | None:
    """The newest sample of a GPU, for views that show "now"."""
    return track.samples[-1] if track.samples else None
