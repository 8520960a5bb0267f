"""Rung-5 evidence from the GPU itself (NVML), sampled during the run or once by `watch`.

This is the JSON contract's `gpu` section. Samples are decimated to a bounded count for long runs, so every statistic
the rules use lives in `GpuSummary`, which the sampler accumulates over *all* ticks. A metric the driver could not give
is None in the samples, with its reason in `GpuTrack.unavailable` ("power_w": "Not Supported").
"""

from __future__ import annotations

import math

import msgspec


class GpuSample(msgspec.Struct):
    t_s: float  # seconds since the run (or the watch) started
    gpu_util_pct: float | None = None  # NVML "utilization": share of time at least one kernel ran
    mem_util_pct: float | None = None  # share of time device memory was read or written
    memory_used_bytes: int | None = None
    power_w: float | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    temperature_c: int | None = None
    # Active clock-event ("throttle") reasons by name: power_cap, thermal, hw_slowdown, ... ("idle" is left out).
    throttle_reasons: list[str] | None = None
    pcie_tx_bytes_per_s: float | None = None
    pcie_rx_bytes_per_s: float | None = None
    # GPM (Hopper and later): what the SMs did, not merely whether a kernel was resident.
    sm_active_pct: float | None = None
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_active_pct: float | None = None


class GpuProcess(msgspec.Struct):
    """A process with a context on the GPU, as NVML lists it (memory is the largest seen during the run)."""

    pid: int
    command: str | None = None  # the command line, when this host can read it
    kind: str = "compute"  # compute | graphics
    used_memory_bytes: int | None = None  # None: NVML withheld it (containers without host PID namespace, WDDM)
    is_job: bool = False  # this job: the process gputriage runs, its DataLoader workers, its ranks
    role: str | None = None  # main | worker | rank N | followed (watch --pid)
    sm_util_pct: float | None = None  # mean per-process SM utilisation, where the driver reports it
    first_seen_s: float | None = None
    last_seen_s: float | None = None


class GpuSummary(msgspec.Struct):
    """Statistics over every tick of the window (not just the kept samples)."""

    sample_count: int = 0
    window_s: float = 0.0
    util_sample_count: int = 0  # utilisation readings (driver history from nvmlDeviceGetSamples, or polls)
    util_source: str | None = None  # driver_samples | polled
    util_mean_pct: float | None = None
    util_zero_pct_of_samples: float | None = None  # readings at exactly 0%
    util_below_50_pct_of_samples: float | None = None
    memory_used_max_bytes: int | None = None
    memory_used_max_pct: float | None = None
    job_memory_max_bytes: int | None = None  # the job's processes together, at their largest
    power_mean_w: float | None = None
    power_max_w: float | None = None
    temperature_max_c: int | None = None
    sm_clock_mean_mhz: float | None = None
    # Share of ticks (in %) each clock-event reason was active, e.g. {"power_cap": 62.5}.
    throttle_pct_of_samples: dict[str, float] = msgspec.field(default_factory=dict)
    sm_active_mean_pct: float | None = None
    sm_occupancy_mean_pct: float | None = None
    tensor_active_mean_pct: float | None = None
    dram_active_mean_pct: float | None = None
    pcie_tx_mean_bytes_per_s: float | None = None
    pcie_rx_mean_bytes_per_s: float | None = None


class GpuTrack(msgspec.Struct):
    index: int  # NVML index
    name: str | None = None
    cuda_index: int | None = None  # the index this job's CUDA sees (through CUDA_VISIBLE_DEVICES), None if hidden
    uuid: str | None = None
    mig_uuid: str | None = None  # set when the job's device is a MIG instance of this GPU
    memory_total_bytes: int | None = None
    power_limit_w: float | None = None
    max_sm_clock_mhz: int | None = None
    lost: bool = False  # "GPU is lost": fell off the bus (Xid 79) before or during the window
    error: str | None = None  # why this device answered nothing
    unavailable: dict[str, str] = msgspec.field(default_factory=dict)  # metric -> reason
    samples: list[GpuSample] = msgspec.field(default_factory=list)
    # The driver's latest utilisation readings (nvmlDeviceGetSamples, one per ~1/6 s, oldest first): the last ~20 s
    # at full resolution, which a one-shot `watch --once` has no ticks for.
    util_recent_pct: list[float] = msgspec.field(default_factory=list)
    summary: GpuSummary = msgspec.field(default_factory=GpuSummary)
    processes: list[GpuProcess] = msgspec.field(default_factory=list)

    def util_mean_pct(self) -> float | None:
        """The GPU's mean NVML utilisation: the sampler's mean over every tick when it kept one (samples are decimated
        on long runs), else the mean of the kept samples. The one number every view and rule shows, and what says
        rung 5 was measured."""
        if self.summary.util_mean_pct is not None:
            return self.summary.util_mean_pct
        present = self._util_present()
        return sum(present) / len(present) if present else None

    def util_readings(self) -> int:
        """How many utilisation readings util_mean_pct() rests on: the sampler's count where its mean is used, else
        the kept samples with a finite reading (a NaN from a hand-edited report counts in neither)."""
        if self.summary.util_mean_pct is not None and self.summary.util_sample_count:
            return self.summary.util_sample_count
        return len(self._util_present())

    def _util_present(self) -> list[float]:
        return [s.gpu_util_pct for s in self.samples if s.gpu_util_pct is not None and math.isfinite(s.gpu_util_pct)]


class GpuSection(msgspec.Struct):
    available: bool = False
    unavailable_reason: str | None = None
    driver_version: str | None = None
    source: str = "nvml"  # nvml | fake:<scenario> (tests, docs)
    interval_s: float | None = None  # cheap metrics
    process_interval_s: float | None = None  # process lists, PCIe
    job_pids: list[int] = msgspec.field(default_factory=list)
    cuda_visible_devices: str | None = None
    devices: list[GpuTrack] = msgspec.field(default_factory=list)

    def measured_rungs(self) -> set[int]:
        """Rung 5 when NVML gave at least one utilisation reading of a GPU."""
        return {5} if any(d.util_mean_pct() is not None for d in self.devices) else set()

    def unmeasured_rungs(self) -> dict[int, str]:
        if self.measured_rungs():
            return {}
        return {5: f"NVML gave no utilisation reading ({self.unavailable_reason or 'no GPU sampled'})"}

    def self_check(self) -> list[str]:
        problems = []
        for dev in self.devices:
            times = [s.t_s for s in dev.samples]
            if times != sorted(times):
                problems.append(f"gpu {dev.index}: sample times are not monotonic")
            pcts = dev.summary.throttle_pct_of_samples.values()
            if any(not 0.0 <= p <= 100.0 for p in pcts):
                problems.append(f"gpu {dev.index}: a throttle share is outside 0-100%")
        return problems
