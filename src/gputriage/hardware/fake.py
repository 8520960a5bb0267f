"""A hand-written fake of the nvidia-ml-py calls gputriage uses, with scenarios named after real failures.

It mirrors the binding's surface: module-level `nvml*` functions with the binding's argument order, `NVMLError` with a
`.value` code, the constants, and result objects with the same attribute names (`.total`, `.busId`, `.gpu`, `.pid`,
`.usedGpuMemory`, `.timeStamp`, `.sampleValue.uiVal`, `.smUtil`, `.isSupportedDevice`, ...). Time-varying readings
follow a fake clock (`FakeNvml(clock=...)`), so tests are deterministic. `scenario_library(name)` returns a fresh fake
(the scenarios live in `gputriage.hardware.fake_scenarios`); tests may also build a `FakeNvml` directly. Gated to the
tests, docs and demos by GPUTRIAGE_FAKE_NVML (see `gputriage.hardware.nvml`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

# NVML return codes (nvml.h); only the ones the fake raises.
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_UNKNOWN = 999

# The texts nvidia-smi and nvmlErrorString print for those codes.
ERROR_TEXT = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "Driver/library version mismatch",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}

# Enumerations, with the binding's names and values.
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1
NVML_TOTAL_POWER_SAMPLES = 0
NVML_GPU_UTILIZATION_SAMPLES = 1
NVML_MEMORY_UTILIZATION_SAMPLES = 2
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_GPM_METRIC_SM_UTIL = 2
NVML_GPM_METRIC_SM_OCCUPANCY = 3
NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
NVML_GPM_METRIC_DRAM_BW_UTIL = 10
NVML_GPM_METRICS_GET_VERSION = 1
NVML_GPM_METRIC_MAX = 477

# Clock-event ("throttle") reason bits, as nvmlClocksEventReason* / nvmlClocksThrottleReason*.
REASON_GPU_IDLE = 0x1
REASON_APPLICATIONS_CLOCKS = 0x2
REASON_SW_POWER_CAP = 0x4
REASON_HW_SLOWDOWN = 0x8
REASON_SYNC_BOOST = 0x10
REASON_SW_THERMAL = 0x20
REASON_HW_THERMAL = 0x40
REASON_HW_POWER_BRAKE = 0x80

GIB = 1024**3
# The driver's utilisation sampling period: nvidia-smi's "GPU-Util" is the share of the last period with a kernel
# resident. It is 1/6 s on most boards; the fake uses it for its nvmlDeviceGetSamples history.
DRIVER_SAMPLE_PERIOD_S = 1 / 6
# How much history the driver keeps for nvmlDeviceGetSamples (a ring of about 120 readings).
DRIVER_HISTORY_SAMPLES = 120
# A fixed epoch for FakeClock, so recorded timestamps in tests and docs are reproducible.
FAKE_EPOCH_S = 1_764_000_000.0


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return ERROR_TEXT.get(self.value, f"NVML error {self.value}")


class FakeClock:
    """Wall-clock seconds that only move when told to (`advance`), for the fake and the sampler alike."""

    def __init__(self, start_s: float = FAKE_EPOCH_S) -> None:
        self.now_s = start_s

    def __call__(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> None:
        self.now_s += seconds


class FakeProcess(msgspec.Struct):
    """A process with a context on a fake GPU, and what /proc would say about it."""

    pid: int
    used_memory_bytes: int | None  # None: NVML withholds it (no host PID namespace, WDDM)
    command: str | None = None
    kind: str = "compute"  # compute | graphics
    sm_util_pct: int | None = None  # per-process utilisation; None: the process does not show in those samples
    ppid: int | None = None
    rank: int | None = None  # RANK in its environment (torchrun)


class FakeMigDevice(msgspec.Struct):
    """A MIG instance handle, as nvmlDeviceGetMigDeviceHandleByIndex returns it."""

    parent: FakeDevice
    uuid: str
    name: str
    memory_total_bytes: int
    memory_used_bytes: int = 0
    gpu_instance_id: int = 1
    not_supported: set[str] = msgspec.field(default_factory=set)
    processes: list[FakeProcess] = msgspec.field(
        default_factory=list
    )  # NVML lists an instance's processes on its handle

    @property
    def lost(self) -> bool:
        return self.parent.lost


class FakeDevice(msgspec.Struct):
    name: str
    uuid: str
    memory_total_bytes: int
    compute_capability: tuple[int, int]
    pci_bus_id: str = "00000000:00:00.0"
    memory_used_bytes: int = 0
    mig_mode: int = 0
    mig_uuids: list[str] = msgspec.field(default_factory=list)
    lost: bool = False  # every call on it raises GPU_IS_LOST, as after "fell off the bus" (Xid 79)
    lost_after_s: float | None = None  # becomes lost this many fake seconds after the fake was built
    # nvml function names this device answers with NOT_SUPPORTED (GeForce boards, vGPU, old boards).
    not_supported: set[str] = msgspec.field(default_factory=set)
    # Live state. Utilisation repeats `util_pattern`, one value per driver sampling period, from the fake's start.
    util_pattern: tuple[int, ...] = (0,)
    mem_util_pattern: tuple[int, ...] = (0,)
    power_mw: int = 60_000
    power_limit_mw: int = 400_000
    sm_clock_mhz: int = 210
    max_sm_clock_mhz: int = 1410
    mem_clock_mhz: int = 1593
    temperature_c: int = 34
    clock_event_reasons: int = REASON_GPU_IDLE
    pcie_tx_kb_per_s: int = 0
    pcie_rx_kb_per_s: int = 0
    processes: list[FakeProcess] = msgspec.field(default_factory=list)
    # GPM metric id -> value (Hopper and later); None: the board has no GPM (pre-Hopper).
    gpm_metrics: dict[int, float] | None = None
    mig_memory_bytes: int = 0  # each MIG instance's memory size, when mig_uuids are set

    def util_at(self, t_s: float) -> int:
        return self.util_pattern[int(t_s / DRIVER_SAMPLE_PERIOD_S) % len(self.util_pattern)]

    def mem_util_at(self, t_s: float) -> int:
        return self.mem_util_pattern[int(t_s / DRIVER_SAMPLE_PERIOD_S) % len(self.mem_util_pattern)]


class _FakeGpmSample(msgspec.Struct):
    device: Any = None
    taken_at_s: float | None = None


class _FakeGpmMetric(msgspec.Struct):
    metricId: int = 0
    nvmlReturn: int = 0
    value: float = 0.0


class FakeGpmMetricsGet:
    """Mirrors pynvml.c_nvmlGpmMetricsGet_t: fill version, numMetrics, sample1/2 and metrics[i].metricId."""

    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: Any = None
        self.sample2: Any = None
        self.metrics = [_FakeGpmMetric() for _ in range(NVML_GPM_METRIC_MAX)]


class FakeProcessTable:
    """What /proc says about the PIDs a scenario invents: command lines, parents, and the RANK env var."""

    def __init__(self, processes: list[FakeProcess]) -> None:
        self._by_pid = {p.pid: p for p in processes}

    def command(self, pid: int) -> str | None:
        proc = self._by_pid.get(pid)
        return proc.command if proc else None

    def parent(self, pid: int) -> int | None:
        proc = self._by_pid.get(pid)
        return proc.ppid if proc else None

    def rank(self, pid: int) -> int | None:
        proc = self._by_pid.get(pid)
        return proc.rank if proc else None


class FakeNvml:
    """Module-like: attribute access gives the `nvml*` functions that the real binding exposes."""

    NVMLError = NVMLError
    c_nvmlGpmMetricsGet_t = FakeGpmMetricsGet

    def __init__(
        self,
        devices: list[FakeDevice],
        *,
        driver_version: str = "550.54.15",
        cuda_driver_version: int = 12040,
        init_error: int | None = None,
        missing_functions: set[str] | None = None,
        clock: Callable[[], float] | None = None,
        extra_processes: list[FakeProcess] | None = None,
        scenario: str | None = None,
    ) -> None:
        self.devices = devices
        self.driver_version = driver_version
        self.cuda_driver_version = cuda_driver_version
        self.init_error = init_error
        # Functions an old driver's libnvidia-ml lacks: the binding raises FUNCTION_NOT_FOUND for them.
        self.missing_functions = missing_functions or set()
        self.initialised = False
        self.clock: Callable[[], float] = clock or time.time
        self.start_s = self.clock()
        self.scenario = scenario
        self.calls = 0  # every nvml* call, for the sampler-cost benchmark
        self.call_counts: dict[str, int] = {}  # per function, for the tests of what is read how often
        self.extra_processes = extra_processes or []  # processes off the GPUs: a torchrun agent, a shell
        self.process_table = self.rebuild_process_table()
        for name, value in _CONSTANTS.items():
            setattr(self, name, value)

    def rebuild_process_table(self) -> FakeProcessTable:
        return FakeProcessTable([p for d in self.devices for p in d.processes] + self.extra_processes)

    # --- life cycle -------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self._check_init()
        self.initialised = False

    # --- system -----------------------------------------------------------------------------------
    def nvmlSystemGetDriverVersion(self) -> str:
        return self._call("nvmlSystemGetDriverVersion", lambda: self.driver_version)

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self._call("nvmlSystemGetCudaDriverVersion", lambda: self.cuda_driver_version)

    def nvmlDeviceGetCount(self) -> int:
        return self._call("nvmlDeviceGetCount", lambda: len(self.devices))

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeDevice:
        def get() -> FakeDevice:
            if not 0 <= index < len(self.devices):
                raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
            return self.devices[index]

        return self._call("nvmlDeviceGetHandleByIndex", get)

    # --- identity ---------------------------------------------------------------------------------
    def nvmlDeviceGetName(self, dev: FakeDevice | FakeMigDevice) -> str:
        return self._dev("nvmlDeviceGetName", dev, lambda: dev.name)

    def nvmlDeviceGetUUID(self, dev: FakeDevice | FakeMigDevice) -> str:
        return self._dev("nvmlDeviceGetUUID", dev, lambda: dev.uuid)

    def nvmlDeviceGetIndex(self, dev: FakeDevice) -> int:
        return self._dev("nvmlDeviceGetIndex", dev, lambda: self.devices.index(dev))

    def nvmlDeviceGetMemoryInfo(self, dev: FakeDevice | FakeMigDevice, version: int | None = None) -> SimpleNamespace:
        def get() -> SimpleNamespace:
            used = dev.memory_used_bytes
            return SimpleNamespace(total=dev.memory_total_bytes, used=used, free=dev.memory_total_bytes - used)

        return self._dev("nvmlDeviceGetMemoryInfo", dev, get)

    def nvmlDeviceGetCudaComputeCapability(self, dev: FakeDevice) -> tuple[int, int]:
        return self._dev("nvmlDeviceGetCudaComputeCapability", dev, lambda: dev.compute_capability)

    def nvmlDeviceGetPciInfo(self, dev: FakeDevice) -> SimpleNamespace:
        return self._dev("nvmlDeviceGetPciInfo", dev, lambda: SimpleNamespace(busId=dev.pci_bus_id))

    # --- MIG --------------------------------------------------------------------------------------
    def nvmlDeviceGetMigMode(self, dev: FakeDevice) -> list[int]:
        return self._dev("nvmlDeviceGetMigMode", dev, lambda: [dev.mig_mode, dev.mig_mode])

    def nvmlDeviceGetMaxMigDeviceCount(self, dev: FakeDevice) -> int:
        return self._dev("nvmlDeviceGetMaxMigDeviceCount", dev, lambda: len(dev.mig_uuids))

    def nvmlDeviceGetMigDeviceHandleByIndex(self, dev: FakeDevice, index: int) -> FakeMigDevice:
        def get() -> FakeMigDevice:
            if not 0 <= index < len(dev.mig_uuids):
                raise NVMLError(NVML_ERROR_NOT_FOUND)
            used = sum(p.used_memory_bytes or 0 for p in dev.processes) if index == 0 else 0
            return FakeMigDevice(
                parent=dev,
                uuid=dev.mig_uuids[index],
                name=f"{dev.name} MIG 3g.40gb",
                memory_total_bytes=dev.mig_memory_bytes,
                memory_used_bytes=used,
                gpu_instance_id=index + 1,
                processes=list(dev.processes) if index == 0 else [],
            )

        return self._dev("nvmlDeviceGetMigDeviceHandleByIndex", dev, get)

    def nvmlDeviceIsMigDeviceHandle(self, dev: FakeDevice | FakeMigDevice) -> int:
        return self._dev("nvmlDeviceIsMigDeviceHandle", dev, lambda: int(isinstance(dev, FakeMigDevice)))

    def nvmlDeviceGetGpuInstanceId(self, dev: FakeMigDevice) -> int:
        return self._mig("nvmlDeviceGetGpuInstanceId", dev, lambda: dev.gpu_instance_id)

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, dev: FakeMigDevice) -> FakeDevice:
        return self._mig("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", dev, lambda: dev.parent)

    # --- live metrics -----------------------------------------------------------------------------
    def nvmlDeviceGetUtilizationRates(self, dev: FakeDevice) -> SimpleNamespace:
        def get() -> SimpleNamespace:
            if dev.mig_mode:
                raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # NVML gives no utilisation for a GPU in MIG mode
            t_s = self._t()
            return SimpleNamespace(gpu=dev.util_at(t_s), memory=dev.mem_util_at(t_s))

        return self._dev("nvmlDeviceGetUtilizationRates", dev, get)

    def nvmlDeviceGetSamples(self, dev: FakeDevice, sampling_type: int, timeStamp: int) -> tuple[int, list[Any]]:
        def get() -> tuple[int, list[Any]]:
            if dev.mig_mode or sampling_type not in (NVML_GPU_UTILIZATION_SAMPLES, NVML_MEMORY_UTILIZATION_SAMPLES):
                raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
            at = dev.util_at if sampling_type == NVML_GPU_UTILIZATION_SAMPLES else dev.mem_util_at
            now_k = int(self._t() / DRIVER_SAMPLE_PERIOD_S)
            samples = []
            # The board ran before the fake was built: its ring is full from the first call, as on a real machine.
            for k in range(now_k - DRIVER_HISTORY_SAMPLES + 1, now_k + 1):
                t_s = k * DRIVER_SAMPLE_PERIOD_S
                stamp_us = round((self.start_s + t_s) * 1e6)
                if stamp_us > timeStamp:
                    value = SimpleNamespace(uiVal=at(t_s + 1e-9))
                    samples.append(SimpleNamespace(timeStamp=stamp_us, sampleValue=value))
            if not samples:
                raise NVMLError(NVML_ERROR_NOT_FOUND)  # the real driver's answer when nothing is newer
            return NVML_VALUE_TYPE_UNSIGNED_INT, samples

        return self._dev("nvmlDeviceGetSamples", dev, get)

    def nvmlDeviceGetPowerUsage(self, dev: FakeDevice) -> int:
        return self._dev("nvmlDeviceGetPowerUsage", dev, lambda: dev.power_mw)

    def nvmlDeviceGetEnforcedPowerLimit(self, dev: FakeDevice) -> int:
        return self._dev("nvmlDeviceGetEnforcedPowerLimit", dev, lambda: dev.power_limit_mw)

    def nvmlDeviceGetClockInfo(self, dev: FakeDevice, type: int) -> int:
        clocks = {
            NVML_CLOCK_GRAPHICS: dev.sm_clock_mhz,
            NVML_CLOCK_SM: dev.sm_clock_mhz,
            NVML_CLOCK_MEM: dev.mem_clock_mhz,
        }
        return self._dev("nvmlDeviceGetClockInfo", dev, lambda: clocks[type])

    def nvmlDeviceGetMaxClockInfo(self, dev: FakeDevice, type: int) -> int:
        clocks = {NVML_CLOCK_GRAPHICS: dev.max_sm_clock_mhz, NVML_CLOCK_SM: dev.max_sm_clock_mhz}
        return self._dev("nvmlDeviceGetMaxClockInfo", dev, lambda: clocks.get(type, dev.mem_clock_mhz))

    def nvmlDeviceGetTemperature(self, dev: FakeDevice, sensor: int) -> int:
        return self._dev("nvmlDeviceGetTemperature", dev, lambda: dev.temperature_c)

    def nvmlDeviceGetCurrentClocksEventReasons(self, dev: FakeDevice) -> int:
        return self._dev("nvmlDeviceGetCurrentClocksEventReasons", dev, lambda: dev.clock_event_reasons)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, dev: FakeDevice) -> int:
        return self._dev("nvmlDeviceGetCurrentClocksThrottleReasons", dev, lambda: dev.clock_event_reasons)

    def nvmlDeviceGetPcieThroughput(self, dev: FakeDevice, counter: int) -> int:
        value = dev.pcie_tx_kb_per_s if counter == NVML_PCIE_UTIL_TX_BYTES else dev.pcie_rx_kb_per_s
        return self._dev("nvmlDeviceGetPcieThroughput", dev, lambda: value)

    # --- processes --------------------------------------------------------------------------------
    def nvmlDeviceGetComputeRunningProcesses(self, dev: FakeDevice | FakeMigDevice) -> list[SimpleNamespace]:
        return self._dev("nvmlDeviceGetComputeRunningProcesses", dev, lambda: _proc_infos(dev, "compute"))

    def nvmlDeviceGetComputeRunningProcesses_v2(self, dev: FakeDevice | FakeMigDevice) -> list[SimpleNamespace]:
        return self._dev("nvmlDeviceGetComputeRunningProcesses_v2", dev, lambda: _proc_infos(dev, "compute"))

    def nvmlDeviceGetGraphicsRunningProcesses(self, dev: FakeDevice | FakeMigDevice) -> list[SimpleNamespace]:
        return self._dev("nvmlDeviceGetGraphicsRunningProcesses", dev, lambda: _proc_infos(dev, "graphics"))

    def nvmlDeviceGetProcessUtilization(self, dev: FakeDevice, timeStamp: int) -> list[SimpleNamespace]:
        def get() -> list[SimpleNamespace]:
            stamp_us = round(self.clock() * 1e6)
            samples = [
                SimpleNamespace(pid=p.pid, timeStamp=stamp_us, smUtil=p.sm_util_pct, memUtil=0, encUtil=0, decUtil=0)
                for p in dev.processes
                if p.sm_util_pct is not None and stamp_us > timeStamp
            ]
            if not samples:
                raise NVMLError(NVML_ERROR_NOT_FOUND)
            return samples

        return self._dev("nvmlDeviceGetProcessUtilization", dev, get)

    # --- GPM (Hopper and later) -------------------------------------------------------------------
    def nvmlGpmQueryDeviceSupport(self, dev: FakeDevice) -> SimpleNamespace:
        supported = int(dev.gpm_metrics is not None)
        return self._dev(
            "nvmlGpmQueryDeviceSupport", dev, lambda: SimpleNamespace(version=1, isSupportedDevice=supported)
        )

    def nvmlGpmSampleAlloc(self) -> _FakeGpmSample:
        return self._call("nvmlGpmSampleAlloc", _FakeGpmSample)

    def nvmlGpmSampleFree(self, sample: _FakeGpmSample) -> None:
        self._call("nvmlGpmSampleFree", lambda: None)

    def nvmlGpmSampleGet(self, dev: FakeDevice, sample: _FakeGpmSample) -> _FakeGpmSample:
        def get() -> _FakeGpmSample:
            if dev.gpm_metrics is None:
                raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
            sample.device, sample.taken_at_s = dev, self.clock()
            return sample

        return self._dev("nvmlGpmSampleGet", dev, get)

    def nvmlGpmMetricsGet(self, metrics_get: FakeGpmMetricsGet) -> FakeGpmMetricsGet:
        def get() -> FakeGpmMetricsGet:
            s1, s2 = metrics_get.sample1, metrics_get.sample2
            if metrics_get.version != NVML_GPM_METRICS_GET_VERSION or s1.taken_at_s is None or s2.taken_at_s is None:
                raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
            values = s2.device.gpm_metrics or {}
            for metric in metrics_get.metrics[: metrics_get.numMetrics]:
                if metric.metricId in values:
                    metric.value, metric.nvmlReturn = values[metric.metricId], NVML_SUCCESS
                else:
                    metric.value, metric.nvmlReturn = 0.0, NVML_ERROR_NOT_SUPPORTED
            return metrics_get

        return self._call("nvmlGpmMetricsGet", get)

    # --- plumbing ---------------------------------------------------------------------------------
    def _t(self) -> float:
        return self.clock() - self.start_s

    def _check_init(self) -> None:
        if not self.initialised:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)

    def _call(self, name: str, get: Callable[[], T]) -> T:
        self.calls += 1
        self.call_counts[name] = self.call_counts.get(name, 0) + 1
        self._check_init()
        if name in self.missing_functions:
            raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
        return get()

    def _dev(self, name: str, dev: FakeDevice | FakeMigDevice, get: Callable[[], T]) -> T:
        def guarded() -> T:
            if self._is_lost(dev):
                raise NVMLError(NVML_ERROR_GPU_IS_LOST)
            if name in dev.not_supported:
                raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
            return get()

        return self._call(name, guarded)

    def _mig(self, name: str, dev: FakeDevice | FakeMigDevice, get: Callable[[], T]) -> T:
        def guarded() -> T:
            if not isinstance(dev, FakeMigDevice):
                raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)  # not a MIG handle
            return get()

        return self._dev(name, dev, guarded)

    def _is_lost(self, dev: FakeDevice | FakeMigDevice) -> bool:
        parent = dev.parent if isinstance(dev, FakeMigDevice) else dev
        return parent.lost or (parent.lost_after_s is not None and self._t() >= parent.lost_after_s)


def _proc_infos(dev: FakeDevice | FakeMigDevice, kind: str) -> list[SimpleNamespace]:
    # The binding's "friendly objects": pid, usedGpuMemory (None when withheld), gpuInstanceId, computeInstanceId.
    return [
        SimpleNamespace(
            pid=p.pid, usedGpuMemory=p.used_memory_bytes, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF
        )
        for p in dev.processes
        if p.kind == kind
    ]


_CONSTANTS = {name: value for name, value in globals().items() if name.startswith("NVML_") and isinstance(value, int)}
