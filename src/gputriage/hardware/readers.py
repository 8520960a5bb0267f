"""Per-device NVML reads for the sampler and `watch`: one open `DeviceProbe` per GPU, a few calls per tick.

Every read goes through `NvmlSession.query`, so nothing here raises: a metric the driver refuses is None in the sample
and its reason is kept once in `probe.unavailable` ("power_w": "Not Supported"). A device that answers "GPU is lost"
is marked lost and never queried again (calls on a lost GPU can block for seconds).
"""

from __future__ import annotations

from typing import Any

import msgspec

from gputriage.hardware.nvml import NvmlSession, Unavailable
from gputriage.record.gpu import GpuSample

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15

# Clock-event reason bits (nvml.h, nvmlClocksEventReason*) -> the names the record uses. GpuIdle is not a throttle.
REASON_BITS = {
    0x2: "applications_clocks",
    0x4: "power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
}
REASON_GPU_IDLE_BIT = 0x1

# The binding's enum values (pynvml): NVML_TEMPERATURE_GPU, NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_PCIE_UTIL_*_BYTES,
# NVML_GPU_UTILIZATION_SAMPLES, and the GPM metric ids. Kept here so this module never needs the binding itself.
TEMPERATURE_GPU = 0
CLOCK_SM = 1
CLOCK_MEM = 2
PCIE_TX_BYTES = 0
PCIE_RX_BYTES = 1
GPU_UTILIZATION_SAMPLES = 1
GPM_METRICS = {2: "sm_active_pct", 3: "sm_occupancy_pct", 5: "tensor_active_pct", 10: "dram_active_pct"}
GPM_METRICS_GET_VERSION = 1

MIG_UTIL_HINT = "not reported for a GPU in MIG mode; DCGM (dcgmi dmon -e 1002) gives per-instance activity"


class ProcessReading(msgspec.Struct):
    pid: int
    kind: str  # compute | graphics
    used_memory_bytes: int | None


class DeviceProbe(msgspec.Struct):
    """One GPU opened for sampling: its handle, its constant facts, and the state its incremental reads keep."""

    index: int
    handle: Any = None
    mig_handle: Any = None  # the job's MIG instance on this GPU, when it runs in one
    mig_uuid: str | None = None
    name: str | None = None
    uuid: str | None = None
    memory_total_bytes: int | None = None
    power_limit_w: float | None = None
    max_sm_clock_mhz: int | None = None
    mig_mode: bool = False
    lost: bool = False
    error: str | None = None
    unavailable: dict[str, str] = msgspec.field(default_factory=dict)
    util_last_seen_us: int = 0
    proc_util_last_seen_us: int = 0
    gpm_prev: Any = None
    gpm_request: Any = None
    gpm_ok: bool = False
    # Which clock-event call this driver answers; an R470 driver lacks the R535 name, so ask the old one directly.
    throttle_fn: str = "nvmlDeviceGetCurrentClocksEventReasons"

    @property
    def answers(self) -> bool:
        return self.handle is not None and not self.lost


def open_probe(
    session: NvmlSession, index: int, mig_uuid: str | None = None, since_epoch_s: float = 0.0
) -> DeviceProbe:
    """Open GPU `index` (and its MIG instance `mig_uuid`, when given) and read what does not change."""
    probe = DeviceProbe(index=index, mig_uuid=mig_uuid)
    probe.util_last_seen_us = probe.proc_util_last_seen_us = int(since_epoch_s * 1e6)
    handle = session.query("nvmlDeviceGetHandleByIndex", index)
    if isinstance(handle, Unavailable):
        probe.error = handle.reason
        return probe
    probe.handle = handle
    probe.name = _text(value(session, probe, "name", "nvmlDeviceGetName", handle))
    probe.uuid = _text(value(session, probe, "uuid", "nvmlDeviceGetUUID", handle))
    if probe.lost:
        return probe
    mig = value(session, probe, "mig_mode", "nvmlDeviceGetMigMode", handle, quiet=True)
    probe.mig_mode = bool(mig[0]) if mig is not None else False
    if mig_uuid is not None:
        probe.mig_handle = _find_mig_handle(session, handle, mig_uuid)
    memory = value(session, probe, "memory", "nvmlDeviceGetMemoryInfo", probe.mig_handle or handle)
    probe.memory_total_bytes = int(memory.total) if memory is not None else None
    limit_mw = value(session, probe, "power_limit_w", "nvmlDeviceGetEnforcedPowerLimit", handle)
    probe.power_limit_w = limit_mw / 1000 if limit_mw is not None else None
    probe.max_sm_clock_mhz = value(session, probe, "max_sm_clock_mhz", "nvmlDeviceGetMaxClockInfo", handle, CLOCK_SM)
    support = value(session, probe, "gpm", "nvmlGpmQueryDeviceSupport", handle, quiet=True)
    probe.gpm_ok = bool(support is not None and support.isSupportedDevice)
    if not probe.gpm_ok and "gpm" not in probe.unavailable:
        probe.unavailable["gpm"] = "GPM needs a Hopper or newer GPU and a driver of the R520 series or later"
    return probe


def read_fast(session: NvmlSession, probe: DeviceProbe, t_s: float) -> GpuSample:
    """The cheap metrics of one tick: about ten calls that read counters the driver already keeps."""
    sample = GpuSample(t_s=t_s)
    if not probe.answers:
        return sample
    h = probe.handle
    util = value(session, probe, "gpu_util_pct", "nvmlDeviceGetUtilizationRates", h)
    if util is not None:
        sample.gpu_util_pct, sample.mem_util_pct = float(util.gpu), float(util.memory)
    memory = value(session, probe, "memory_used_bytes", "nvmlDeviceGetMemoryInfo", probe.mig_handle or h)
    sample.memory_used_bytes = int(memory.used) if memory is not None else None
    power_mw = value(session, probe, "power_w", "nvmlDeviceGetPowerUsage", h)
    sample.power_w = power_mw / 1000 if power_mw is not None else None
    sample.sm_clock_mhz = value(session, probe, "sm_clock_mhz", "nvmlDeviceGetClockInfo", h, CLOCK_SM)
    sample.mem_clock_mhz = value(session, probe, "mem_clock_mhz", "nvmlDeviceGetClockInfo", h, CLOCK_MEM)
    sample.temperature_c = value(session, probe, "temperature_c", "nvmlDeviceGetTemperature", h, TEMPERATURE_GPU)
    sample.throttle_reasons = read_throttle(session, probe)
    if probe.gpm_ok:
        for key, metric in read_gpm(session, probe).items():
            setattr(sample, key, metric)
    return sample


def read_throttle(session: NvmlSession, probe: DeviceProbe) -> list[str] | None:
    """Active clock-event reasons; the R535+ name first, then the older ...ThrottleReasons (same bits)."""
    if "throttle_reasons" in probe.unavailable:
        return None
    reasons = session.query(probe.throttle_fn, probe.handle)
    if isinstance(reasons, Unavailable) and not _is_lost(reasons) and probe.throttle_fn != _THROTTLE_FALLBACK:
        probe.throttle_fn = _THROTTLE_FALLBACK
        reasons = session.query(probe.throttle_fn, probe.handle)
    bits = _keep(probe, "throttle_reasons", reasons)
    if bits is None:
        return None
    return [name for bit, name in REASON_BITS.items() if int(bits) & bit]


_THROTTLE_FALLBACK = "nvmlDeviceGetCurrentClocksThrottleReasons"
# "No sample newer than the timestamp": NOT_FOUND from the driver; some bindings raise NVMLError(SUCCESS) when the
# sizing call finds nothing to size.
_NOTHING_NEWER = (NVML_ERROR_NOT_FOUND, 0)


def read_util_history(session: NvmlSession, probe: DeviceProbe, start_epoch_s: float) -> list[tuple[float, float]]:
    """The driver's own utilisation readings since the last call: (t_s, pct), finer than our ticks at no extra cost.

    nvmlDeviceGetSamples returns the driver's ring of readings (one per ~1/6 s) newer than a timestamp, so one call
    per second recovers every reading in between. NOT_FOUND only means "nothing newer yet".
    """
    if not probe.answers or "util_history" in probe.unavailable:
        return []
    got = session.query("nvmlDeviceGetSamples", probe.handle, GPU_UTILIZATION_SAMPLES, probe.util_last_seen_us)
    if isinstance(got, Unavailable):
        if got.code not in _NOTHING_NEWER:
            _keep(probe, "util_history", got)
        return []
    _value_type, samples = got
    history = []
    for s in samples:
        stamp_us = int(s.timeStamp)
        probe.util_last_seen_us = max(probe.util_last_seen_us, stamp_us)
        history.append((stamp_us / 1e6 - start_epoch_s, float(s.sampleValue.uiVal)))
    return history


def read_processes(session: NvmlSession, probe: DeviceProbe) -> list[ProcessReading] | None:
    """Compute and graphics processes with their memory; None when the driver gives no list at all."""
    if not probe.answers:
        return None
    h = probe.mig_handle or probe.handle
    found: list[ProcessReading] = []
    any_list = False
    for kind, names in (
        ("compute", ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2")),
        ("graphics", ("nvmlDeviceGetGraphicsRunningProcesses",)),
    ):
        got: Any = Unavailable("no call")
        for name in names:
            got = session.query(name, h)
            if not (isinstance(got, Unavailable) and got.code == NVML_ERROR_FUNCTION_NOT_FOUND):
                break
        listed = _keep(probe, f"{kind}_processes", got)
        if listed is None:
            continue
        any_list = True
        for info in listed:
            used = info.usedGpuMemory
            found.append(ProcessReading(int(info.pid), kind, int(used) if used is not None else None))
    return found if any_list else None


def read_process_util(session: NvmlSession, probe: DeviceProbe) -> dict[int, float]:
    """Per-process SM utilisation since the last call (pid -> %), where the driver keeps it."""
    if not probe.answers or "process_util" in probe.unavailable:
        return {}
    got = session.query("nvmlDeviceGetProcessUtilization", probe.handle, probe.proc_util_last_seen_us)
    if isinstance(got, Unavailable):
        if got.code not in _NOTHING_NEWER:  # no process ran a kernel since the last call
            _keep(probe, "process_util", got)
        return {}
    util: dict[int, float] = {}
    for s in got:
        probe.proc_util_last_seen_us = max(probe.proc_util_last_seen_us, int(s.timeStamp))
        util[int(s.pid)] = max(util.get(int(s.pid), 0.0), float(s.smUtil))
    return util


def read_pcie(session: NvmlSession, probe: DeviceProbe) -> tuple[float | None, float | None]:
    """PCIe TX/RX in bytes/s. Each call waits ~20 ms inside the driver, so the sampler reads it at the slow rate."""
    if not probe.answers or "pcie" in probe.unavailable:
        return None, None
    tx = value(session, probe, "pcie", "nvmlDeviceGetPcieThroughput", probe.handle, PCIE_TX_BYTES)
    rx = value(session, probe, "pcie", "nvmlDeviceGetPcieThroughput", probe.handle, PCIE_RX_BYTES)
    return (tx * 1024.0 if tx is not None else None, rx * 1024.0 if rx is not None else None)


def read_gpm(session: NvmlSession, probe: DeviceProbe) -> dict[str, float]:
    """SM activity, occupancy, tensor and DRAM activity between the previous GPM sample and now (Hopper+)."""
    sample = session.query("nvmlGpmSampleAlloc")
    if (
        isinstance(sample, Unavailable)
        or _keep(probe, "gpm", session.query("nvmlGpmSampleGet", probe.handle, sample)) is None
    ):
        probe.gpm_ok = False
        return {}
    previous, probe.gpm_prev = probe.gpm_prev, sample
    if previous is None:
        return {}
    if probe.gpm_request is None:
        # One request struct per GPU, reused: it holds NVML_GPM_METRIC_MAX slots, too many to build every tick.
        make_request = getattr(session.lib, "c_nvmlGpmMetricsGet_t", None)
        if make_request is None:
            probe.gpm_ok = False
            probe.unavailable["gpm"] = "this nvidia-ml-py has no GPM support (it needs 12.535 or later)"
            return {}
        probe.gpm_request = make_request()
    request = probe.gpm_request
    request.version = GPM_METRICS_GET_VERSION
    request.numMetrics = len(GPM_METRICS)
    request.sample1, request.sample2 = previous, sample
    for slot, metric_id in enumerate(GPM_METRICS):
        request.metrics[slot].metricId = metric_id
    result = session.query("nvmlGpmMetricsGet", request)
    session.query("nvmlGpmSampleFree", previous)
    if _keep(probe, "gpm", result) is None:
        return {}
    out = {}
    for slot, key in enumerate(GPM_METRICS.values()):
        metric = result.metrics[slot]
        if int(metric.nvmlReturn) == 0:
            out[key] = round(float(metric.value), 2)
    return out


def close_probe(session: NvmlSession, probe: DeviceProbe) -> None:
    if probe.gpm_prev is not None:
        session.query("nvmlGpmSampleFree", probe.gpm_prev)
        probe.gpm_prev = None


def value(session: NvmlSession, probe: DeviceProbe, metric: str, fn: str, *args: Any, quiet: bool = False) -> Any:
    """`session.query(fn, *args)`, or None with the reason kept under `metric` (unless `quiet`).

    A metric refused once is not asked again in this window: NOT_SUPPORTED does not change while a job runs, and the
    tick stays at the calls that can answer.
    """
    if probe.lost or metric in probe.unavailable:
        return None
    got = session.query(fn, *args)
    if quiet and isinstance(got, Unavailable) and not _is_lost(got):
        return None
    return _keep(probe, metric, got)


def _keep(probe: DeviceProbe, metric: str, got: Any) -> Any:
    if not isinstance(got, Unavailable):
        return got
    if _is_lost(got):
        probe.lost, probe.error = True, got.reason
    else:
        reason = got.reason
        if probe.mig_mode and metric in {"gpu_util_pct", "util_history", "process_util"}:
            reason = f"{reason}: {MIG_UTIL_HINT}"
        probe.unavailable.setdefault(metric, reason)
    return None


def _is_lost(got: Unavailable) -> bool:
    return got.code == NVML_ERROR_GPU_IS_LOST


def _find_mig_handle(session: NvmlSession, handle: Any, mig_uuid: str) -> Any:
    count = session.query("nvmlDeviceGetMaxMigDeviceCount", handle)
    if isinstance(count, Unavailable):
        return None
    for slot in range(int(count)):
        mig = session.query("nvmlDeviceGetMigDeviceHandleByIndex", handle, slot)
        if not isinstance(mig, Unavailable) and _text(session.query("nvmlDeviceGetUUID", mig)) == mig_uuid:
            return mig
    return None


def _text(got: Any) -> str | None:
    if got is None or isinstance(got, Unavailable):
        return None
    return got.decode(errors="replace") if isinstance(got, bytes) else str(got)
