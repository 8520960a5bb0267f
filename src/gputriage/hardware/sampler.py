"""The NVML sampler: a background thread that records the job's GPUs into the Run record's `gpu` section.

Two rates. Each tick (default 5 Hz, at most 10 Hz) reads the cheap counters the driver already keeps: utilisation,
memory, power, clocks, temperature, clock-event reasons and, on Hopper+, GPM. Every `process_interval_s` (at least
1 s) it reads what costs more: the process lists, per-process utilisation, PCIe throughput (~20 ms inside the
driver), and the driver's own utilisation history (nvmlDeviceGetSamples), which recovers every 1/6 s reading between
ticks for the price of one call.

Statistics accumulate over every tick; the samples kept for display are decimated to `max_samples` per GPU, so a
week-long job costs the same memory as a minute-long one. `tick()` is public so tests drive it with a fake clock.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

import msgspec

from gputriage.hardware.nvml import NvmlSession, Unavailable
from gputriage.hardware.procs import ProcessTable, job_role, table_for
from gputriage.hardware.readers import (
    DeviceProbe,
    ProcessReading,
    close_probe,
    open_probe,
    read_fast,
    read_pcie,
    read_process_util,
    read_processes,
    read_util_history,
)
from gputriage.hardware.visible import NvmlIdentity, Visibility, map_visible
from gputriage.record.gpu import GpuProcess, GpuSample, GpuSection, GpuSummary, GpuTrack

MIN_INTERVAL_S = 0.1  # 10 Hz: faster buys nothing, the driver itself refreshes utilisation every ~1/6 s
MIN_PROCESS_INTERVAL_S = 1.0
DEFAULT_MAX_SAMPLES = 600
UTIL_BUSY_THRESHOLD_PCT = 50.0  # TensorBoard's profiler plugin flags GPU utilisation below 50%
RECENT_UTIL_READINGS = 120  # the size of the driver's own ring: ~20 s at one reading per 1/6 s


class JobSpec(msgspec.Struct):
    """Which PIDs are "the job": a root PID, and whether torchrun sibling ranks count."""

    root_pid: int | None = None
    with_ranks: bool = False
    root_role: str = "main"


class _Running(msgspec.Struct):
    n: int = 0
    total: float = 0.0
    peak: float | None = None

    def add(self, x: float | None) -> None:
        if x is None:
            return
        self.n += 1
        self.total += x
        self.peak = x if self.peak is None else max(self.peak, x)

    def mean(self) -> float | None:
        return round(self.total / self.n, 2) if self.n else None


class _UtilCounter(msgspec.Struct):
    n: int = 0
    total: float = 0.0
    zero: int = 0
    below: int = 0
    first_t_s: float | None = None
    last_t_s: float | None = None

    def add(self, pct: float, t_s: float) -> None:
        self.first_t_s = t_s if self.first_t_s is None else min(self.first_t_s, t_s)
        self.last_t_s = t_s if self.last_t_s is None else max(self.last_t_s, t_s)
        self.n += 1
        self.total += pct
        self.zero += pct == 0.0
        self.below += pct < UTIL_BUSY_THRESHOLD_PCT


class _TrackBuilder(msgspec.Struct):
    """Everything one GPU accumulates over the window."""

    probe: DeviceProbe
    cuda_index: int | None
    max_samples: int
    samples: list[GpuSample] = msgspec.field(default_factory=list)
    stride: int = 1
    ticks: int = 0
    first_t_s: float | None = None
    last_t_s: float | None = None
    polled_util: _UtilCounter = msgspec.field(default_factory=_UtilCounter)
    history_util: _UtilCounter = msgspec.field(default_factory=_UtilCounter)
    memory: _Running = msgspec.field(default_factory=_Running)
    job_memory: _Running = msgspec.field(default_factory=_Running)
    power: _Running = msgspec.field(default_factory=_Running)
    temperature: _Running = msgspec.field(default_factory=_Running)
    sm_clock: _Running = msgspec.field(default_factory=_Running)
    gpm: dict[str, _Running] = msgspec.field(default_factory=dict)
    pcie_tx: _Running = msgspec.field(default_factory=_Running)
    pcie_rx: _Running = msgspec.field(default_factory=_Running)
    throttle_ticks: int = 0
    throttle_counts: dict[str, int] = msgspec.field(default_factory=dict)
    processes: dict[int, GpuProcess] = msgspec.field(default_factory=dict)
    process_util: dict[int, _Running] = msgspec.field(default_factory=dict)
    recent_util: deque[float] = msgspec.field(default_factory=lambda: deque(maxlen=RECENT_UTIL_READINGS))

    def add_sample(self, sample: GpuSample) -> None:
        self.ticks += 1
        self.first_t_s = sample.t_s if self.first_t_s is None else self.first_t_s
        self.last_t_s = sample.t_s
        if sample.gpu_util_pct is not None:
            self.polled_util.add(sample.gpu_util_pct, sample.t_s)
        self.memory.add(sample.memory_used_bytes)
        self.power.add(sample.power_w)
        self.temperature.add(sample.temperature_c)
        self.sm_clock.add(sample.sm_clock_mhz)
        for key in ("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct"):
            self.gpm.setdefault(key, _Running()).add(getattr(sample, key))
        if sample.throttle_reasons is not None:
            self.throttle_ticks += 1
            for reason in sample.throttle_reasons:
                self.throttle_counts[reason] = self.throttle_counts.get(reason, 0) + 1
        self._keep(sample)

    def _keep(self, sample: GpuSample) -> None:
        # Keep every `stride`-th tick; when the buffer fills, halve it and double the stride (bounded memory).
        if (self.ticks - 1) % self.stride:
            return
        self.samples.append(sample)
        if len(self.samples) > self.max_samples:
            self.samples = self.samples[::2]
            self.stride *= 2


class GpuSampler:
    """Samples the chosen GPUs; `start()` runs it on a daemon thread, `stop()` ends it and takes a last tick."""

    def __init__(
        self,
        session: NvmlSession,
        *,
        interval_s: float = 0.2,
        process_interval_s: float = 1.0,
        clock: Callable[[], float] = time.time,
        job: JobSpec | None = None,
        cuda_visible_devices: str | None = None,
        device_order: str | None = None,
        only_visible: bool = True,
        history_s: float = 0.0,
        max_samples: int = DEFAULT_MAX_SAMPLES,
        table: ProcessTable | None = None,
    ) -> None:
        self.session = session
        self.interval_s = max(interval_s, MIN_INTERVAL_S)
        self.process_interval_s = max(process_interval_s, MIN_PROCESS_INTERVAL_S, self.interval_s)
        self.clock = clock
        self.job = job or JobSpec()
        self.cuda_visible_devices = cuda_visible_devices
        self.device_order = device_order
        self.only_visible = only_visible
        self.history_s = history_s  # how far back the first driver-history read may reach (watch --once)
        self.max_samples = max_samples
        self.table = table or table_for(session.lib)
        self.start_s = clock()
        self.next_slow_s: float | None = None
        self.tracks: list[_TrackBuilder] = []
        self.visibility = Visibility()
        self.unavailable_reason: str | None = None
        self.driver_version: str | None = None
        self._roles: dict[int, str | None] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._opened = False

    # --- life cycle -------------------------------------------------------------------------------
    def open(self) -> None:
        """Find the GPUs and open a probe for each one to sample. Never raises."""
        self._opened = True
        if not self.session.ok:
            assert self.session.init_error is not None
            self.unavailable_reason = self.session.init_error.reason
            return
        version = self.session.query("nvmlSystemGetDriverVersion")
        if not isinstance(version, Unavailable):
            self.driver_version = version.decode() if isinstance(version, bytes) else str(version)
        count = self.session.query("nvmlDeviceGetCount")
        if isinstance(count, Unavailable):
            self.unavailable_reason = count.reason
            return
        since_s = self.start_s - self.history_s
        probes = [open_probe(self.session, i, None, since_s) for i in range(int(count))]
        identities = [NvmlIdentity(p.index, p.uuid, p.name, self._mig_uuids(p) if p.mig_mode else ()) for p in probes]
        self.visibility = map_visible(self.cuda_visible_devices, identities, self.device_order)
        for found in probes:
            seen = self.visibility.for_nvml(found.index)
            if self.only_visible and seen is None:
                continue
            probe = found
            # The job's MIG instance, when it runs in one; `watch` (every GPU) shows whole boards.
            if self.only_visible and seen is not None and seen.mig_uuid is not None:
                probe = open_probe(self.session, found.index, seen.mig_uuid, since_s)
            self.tracks.append(_TrackBuilder(probe, seen.cuda_index if seen else None, self.max_samples))
        if not probes:
            self.unavailable_reason = "NVML found no GPU"
        elif not self.tracks:
            ignored = f" (CUDA ignores: {', '.join(self.visibility.ignored)})" if self.visibility.ignored else ""
            self.unavailable_reason = (
                f"CUDA_VISIBLE_DEVICES={self.cuda_visible_devices!r} leaves no GPU visible{ignored}"
            )

    def start(self) -> None:
        if not self._opened:
            self.open()
        if not self.tracks or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="gputriage-nvml-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the thread and take one last tick, so even a sub-second job has a reading."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        self.tick(force_slow=True)
        for track in self.tracks:
            close_probe(self.session, track.probe)

    def _loop(self) -> None:
        # The first tick comes at once, before the user's code has run: the "before" state of the GPUs.
        while True:
            try:
                self.tick()
            except Exception as exc:  # a sampler bug must never reach the user's job; keep the reason instead
                self.unavailable_reason = f"the sampler stopped: {type(exc).__name__}: {exc}"
                return
            if self._stop.wait(self.interval_s):
                return

    # --- sampling ---------------------------------------------------------------------------------
    def tick(self, *, force_slow: bool = False) -> None:
        """Read every tracked GPU once: the cheap counters always, the costly reads when their interval is due."""
        if not self._opened:
            self.open()
        with self._lock:
            now_s = self.clock()
            t_s = round(now_s - self.start_s, 6)
            slow = force_slow or self.next_slow_s is None or now_s >= self.next_slow_s
            if slow:
                self.next_slow_s = now_s + self.process_interval_s
            for track in self.tracks:
                try:
                    self._tick_device(track, t_s, slow)
                except Exception as exc:  # a binding that misbehaves (not an NVMLError) loses one GPU, not the run
                    track.probe.error = f"gputriage could not read this GPU: {type(exc).__name__}: {exc}"
                    track.probe.handle = None

    def _tick_device(self, track: _TrackBuilder, t_s: float, slow: bool) -> None:
        probe = track.probe
        if not probe.answers:
            return
        sample = read_fast(self.session, probe, t_s)
        if slow:
            sample.pcie_tx_bytes_per_s, sample.pcie_rx_bytes_per_s = read_pcie(self.session, probe)
            track.pcie_tx.add(sample.pcie_tx_bytes_per_s)
            track.pcie_rx.add(sample.pcie_rx_bytes_per_s)
            for reading_t_s, pct in read_util_history(self.session, probe, self.start_s):
                track.history_util.add(pct, reading_t_s)
                track.recent_util.append(pct)
            self._merge_processes(track, read_processes(self.session, probe), t_s)
            for pid, pct in read_process_util(self.session, probe).items():
                track.process_util.setdefault(pid, _Running()).add(pct)
        if not probe.lost:
            track.add_sample(sample)

    def _merge_processes(self, track: _TrackBuilder, found: list[ProcessReading] | None, t_s: float) -> None:
        if found is None:
            return
        job_bytes = 0
        for reading in found:
            proc = track.processes.get(reading.pid)
            if proc is None:
                role = self.role_of(reading.pid)
                proc = GpuProcess(
                    pid=reading.pid,
                    command=self.table.command(reading.pid),
                    kind=reading.kind,
                    is_job=role is not None,
                    role=role,
                    first_seen_s=t_s,
                )
                track.processes[reading.pid] = proc
            proc.last_seen_s = t_s
            if reading.used_memory_bytes is not None:
                proc.used_memory_bytes = max(proc.used_memory_bytes or 0, reading.used_memory_bytes)
                job_bytes += reading.used_memory_bytes if proc.is_job else 0
        if self.job.root_pid is not None:
            track.job_memory.add(job_bytes)

    def role_of(self, pid: int) -> str | None:
        """The job role of a PID on the GPU (cached: each PID is classified once)."""
        if self.job.root_pid is None:
            return None
        if pid not in self._roles:
            role = job_role(self.table, pid, self.job.root_pid, with_ranks=self.job.with_ranks)
            self._roles[pid] = self.job.root_role if role == "main" else role
        return self._roles[pid]

    def _mig_uuids(self, probe: DeviceProbe) -> tuple[str, ...]:
        count = self.session.query("nvmlDeviceGetMaxMigDeviceCount", probe.handle)
        uuids: list[str] = []
        for slot in range(0 if isinstance(count, Unavailable) else int(count)):
            mig = self.session.query("nvmlDeviceGetMigDeviceHandleByIndex", probe.handle, slot)
            uuid = None if isinstance(mig, Unavailable) else self.session.query("nvmlDeviceGetUUID", mig)
            if isinstance(uuid, str | bytes):
                uuids.append(uuid.decode() if isinstance(uuid, bytes) else uuid)
        return tuple(uuids)

    # --- the record -------------------------------------------------------------------------------
    def section(self) -> GpuSection:
        """The `gpu` section as of now (safe to call while the thread runs)."""
        with self._lock:
            section = GpuSection(
                available=self.unavailable_reason is None and bool(self.tracks),
                unavailable_reason=self.unavailable_reason,
                driver_version=self.driver_version,
                source=_source(self.session),
                interval_s=self.interval_s,
                process_interval_s=self.process_interval_s,
                cuda_visible_devices=self.cuda_visible_devices,
                devices=[_track(b) for b in self.tracks],
            )
            job = {p.pid for d in section.devices for p in d.processes if p.is_job}
            if self.job.root_pid is not None:
                job.add(self.job.root_pid)
            section.job_pids = sorted(job)
            return section


def _source(session: NvmlSession) -> str:
    scenario = getattr(session.lib, "scenario", None)
    return f"fake:{scenario}" if scenario else "nvml"


def _track(b: _TrackBuilder) -> GpuTrack:
    p = b.probe
    track = GpuTrack(
        index=p.index,
        name=p.name,
        cuda_index=b.cuda_index,
        uuid=p.uuid,
        mig_uuid=p.mig_uuid,
        memory_total_bytes=p.memory_total_bytes,
        power_limit_w=p.power_limit_w,
        max_sm_clock_mhz=p.max_sm_clock_mhz,
        lost=p.lost,
        error=p.error,
        unavailable=dict(p.unavailable),
        samples=list(b.samples),
        util_recent_pct=list(b.recent_util),
        summary=_summary(b),
    )
    processes = []
    for pid, proc in b.processes.items():
        util = b.process_util.get(pid)
        # A copy: the sampler keeps updating its own while the caller reads this one.
        processes.append(msgspec.structs.replace(proc, sm_util_pct=util.mean() if util else None))
    track.processes = sorted(processes, key=lambda q: (-(q.used_memory_bytes or 0), q.pid))
    return track


def _summary(b: _TrackBuilder) -> GpuSummary:
    util, source = (b.history_util, "driver_samples") if b.history_util.n else (b.polled_util, "polled")
    s = GpuSummary(sample_count=b.ticks)
    spans = [(b.first_t_s, b.last_t_s), (util.first_t_s, util.last_t_s)]
    s.window_s = round(
        max((last - first for first, last in spans if first is not None and last is not None), default=0.0), 6
    )
    if util.n:
        s.util_sample_count, s.util_source = util.n, source
        s.util_mean_pct = round(util.total / util.n, 2)
        s.util_zero_pct_of_samples = round(100.0 * util.zero / util.n, 2)
        s.util_below_50_pct_of_samples = round(100.0 * util.below / util.n, 2)
    if b.memory.peak is not None:
        s.memory_used_max_bytes = int(b.memory.peak)
        if b.probe.memory_total_bytes:
            s.memory_used_max_pct = round(100.0 * b.memory.peak / b.probe.memory_total_bytes, 2)
    s.job_memory_max_bytes = int(b.job_memory.peak) if b.job_memory.peak is not None else None
    s.power_mean_w, s.power_max_w = b.power.mean(), b.power.peak
    s.temperature_max_c = int(b.temperature.peak) if b.temperature.peak is not None else None
    s.sm_clock_mean_mhz = b.sm_clock.mean()
    if b.throttle_ticks:
        s.throttle_pct_of_samples = {
            reason: round(100.0 * n / b.throttle_ticks, 2) for reason, n in sorted(b.throttle_counts.items())
        }
    gpm = {k: r.mean() for k, r in b.gpm.items()}
    s.sm_active_mean_pct, s.sm_occupancy_mean_pct = gpm.get("sm_active_pct"), gpm.get("sm_occupancy_pct")
    s.tensor_active_mean_pct, s.dram_active_mean_pct = gpm.get("tensor_active_pct"), gpm.get("dram_active_pct")
    s.pcie_tx_mean_bytes_per_s, s.pcie_rx_mean_bytes_per_s = b.pcie_tx.mean(), b.pcie_rx.mean()
    return s
