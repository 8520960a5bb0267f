"""A hand-written fake of the nvidia-ml-py calls gputriage uses, with scenarios named after real failures.

It mirrors the binding's surface: module-level `nvml*` functions, `NVMLError` with a `.value` code, the error
constants, and result objects with the same attribute names (`.total`, `.busId`, ...). `scenario_library(name)`
returns a fresh fake; tests may also build a `FakeNvml` directly. Gated to the tests, docs and demos by
GPUTRIAGE_FAKE_NVML (see `gputriage.hardware.nvml`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, TypeVar

T = TypeVar("T")

# NVML return codes (nvml.h); only the ones the scenarios raise.
NVML_ERROR_UNINITIALIZED = 1
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

GIB = 1024**3


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return ERROR_TEXT.get(self.value, f"NVML error {self.value}")


@dataclass
class FakeDevice:
    name: str
    uuid: str
    memory_total_bytes: int
    compute_capability: tuple[int, int]
    pci_bus_id: str = "00000000:00:00.0"
    memory_used_bytes: int = 0
    mig_mode: int = 0
    mig_uuids: list[str] = field(default_factory=list)
    lost: bool = False  # every call on it raises GPU_IS_LOST, as after "fell off the bus" (Xid 79)
    # nvml function names this device answers with NOT_SUPPORTED (GeForce boards, vGPU, old boards).
    not_supported: set[str] = field(default_factory=set)


class FakeNvml:
    """Module-like: attribute access gives the `nvml*` functions that the real binding exposes."""

    NVMLError = NVMLError

    def __init__(
        self,
        devices: list[FakeDevice],
        *,
        driver_version: str = "550.54.15",
        cuda_driver_version: int = 12040,
        init_error: int | None = None,
        missing_functions: set[str] | None = None,
    ) -> None:
        self.devices = devices
        self.driver_version = driver_version
        self.cuda_driver_version = cuda_driver_version
        self.init_error = init_error
        # Functions an old driver's libnvidia-ml lacks: the binding raises FUNCTION_NOT_FOUND for them.
        self.missing_functions = missing_functions or set()
        self.initialised = False
        for code_name, code in _ERROR_CONSTANTS.items():
            setattr(self, code_name, code)

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
                raise NVMLError(2)  # NVML_ERROR_INVALID_ARGUMENT
            return self.devices[index]

        return self._call("nvmlDeviceGetHandleByIndex", get)

    # --- per device -------------------------------------------------------------------------------
    def nvmlDeviceGetName(self, dev: FakeDevice) -> str:
        return self._dev("nvmlDeviceGetName", dev, lambda: dev.name)

    def nvmlDeviceGetUUID(self, dev: FakeDevice) -> str:
        return self._dev("nvmlDeviceGetUUID", dev, lambda: dev.uuid)

    def nvmlDeviceGetMemoryInfo(self, dev: FakeDevice) -> SimpleNamespace:
        def get() -> SimpleNamespace:
            used = dev.memory_used_bytes
            return SimpleNamespace(total=dev.memory_total_bytes, used=used, free=dev.memory_total_bytes - used)

        return self._dev("nvmlDeviceGetMemoryInfo", dev, get)

    def nvmlDeviceGetCudaComputeCapability(self, dev: FakeDevice) -> tuple[int, int]:
        return self._dev("nvmlDeviceGetCudaComputeCapability", dev, lambda: dev.compute_capability)

    def nvmlDeviceGetPciInfo(self, dev: FakeDevice) -> SimpleNamespace:
        return self._dev("nvmlDeviceGetPciInfo", dev, lambda: SimpleNamespace(busId=dev.pci_bus_id))

    def nvmlDeviceGetMigMode(self, dev: FakeDevice) -> tuple[int, int]:
        return self._dev("nvmlDeviceGetMigMode", dev, lambda: (dev.mig_mode, dev.mig_mode))

    def nvmlDeviceGetMaxMigDeviceCount(self, dev: FakeDevice) -> int:
        return self._dev("nvmlDeviceGetMaxMigDeviceCount", dev, lambda: len(dev.mig_uuids))

    def nvmlDeviceGetMigDeviceHandleByIndex(self, dev: FakeDevice, index: int) -> SimpleNamespace:
        return self._dev(
            "nvmlDeviceGetMigDeviceHandleByIndex", dev, lambda: SimpleNamespace(parent=dev, uuid=dev.mig_uuids[index])
        )

    # --- plumbing ---------------------------------------------------------------------------------
    def _check_init(self) -> None:
        if not self.initialised:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)

    def _call(self, name: str, get: Callable[[], T]) -> T:
        self._check_init()
        if name in self.missing_functions:
            raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
        return get()

    def _dev(self, name: str, dev: FakeDevice, get: Callable[[], T]) -> T:
        def guarded() -> T:
            if dev.lost:
                raise NVMLError(NVML_ERROR_GPU_IS_LOST)
            if name in dev.not_supported:
                raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
            return get()

        return self._call(name, guarded)


_ERROR_CONSTANTS = {name: value for name, value in globals().items() if name.startswith("NVML_ERROR_")}


def a100(index: int = 0, **kw: Any) -> FakeDevice:
    return FakeDevice(
        name="NVIDIA A100-SXM4-80GB",
        uuid=f"GPU-a100{index:04d}-5d2c-4e1b-9c1e-8a7f3b2c{index:04d}",
        memory_total_bytes=80 * GIB,
        compute_capability=(8, 0),
        pci_bus_id=f"00000000:{0x10 + index:02X}:00.0",
        **kw,
    )


def _healthy_a100() -> FakeNvml:
    return FakeNvml([a100(0)])


def _old_driver_410() -> FakeNvml:
    # pytorch#31243: driver 410.48 only supports CUDA 10.0. That libnvidia-ml predates
    # nvmlSystemGetCudaDriverVersion (added with 418-era drivers), so the binding raises FUNCTION_NOT_FOUND.
    dev = FakeDevice(
        name="Tesla V100-SXM2-16GB",
        uuid="GPU-0b1a6b1e-8f53-2a1c-7f0e-3c5d9e7a1b2c",
        memory_total_bytes=16 * GIB,
        compute_capability=(7, 0),
    )
    return FakeNvml(
        [dev], driver_version="410.48", cuda_driver_version=10000, missing_functions={"nvmlSystemGetCudaDriverVersion"}
    )


def _driver_library_mismatch() -> FakeNvml:
    # illinois-scicomp/machine-shop-maintenance#60: "Failed to initialize NVML: Driver/library version mismatch".
    return FakeNvml([], init_error=NVML_ERROR_LIB_RM_VERSION_MISMATCH)


def _driver_not_loaded() -> FakeNvml:
    return FakeNvml([], init_error=NVML_ERROR_DRIVER_NOT_LOADED)


def _library_not_found() -> FakeNvml:
    return FakeNvml([], init_error=NVML_ERROR_LIBRARY_NOT_FOUND)


def _not_supported() -> FakeNvml:
    # gpustat's "N/A" reports: consumer boards answer NOT_SUPPORTED for several queries.
    dev = FakeDevice(
        name="NVIDIA GeForce RTX 3090",
        uuid="GPU-3090aaaa-1111-2222-3333-444455556666",
        memory_total_bytes=24 * GIB,
        compute_capability=(8, 6),
        not_supported={"nvmlDeviceGetMigMode", "nvmlDeviceGetPciInfo"},
    )
    return FakeNvml([dev], driver_version="535.104.05", cuda_driver_version=12020)


def _gpu_lost() -> FakeNvml:
    # "GPU has fallen off the bus" (Xid 79): NVML still lists the board, but every query on it fails.
    return FakeNvml([a100(0), a100(1, lost=True)])


def _mig() -> FakeNvml:
    uuids = [f"MIG-4f3c1a2b-77d0-5e1f-9a8b-{i:012d}" for i in range(2)]
    return FakeNvml([a100(0, mig_mode=1, mig_uuids=uuids)])


def _no_gpu() -> FakeNvml:
    return FakeNvml([])


SCENARIOS: dict[str, Callable[[], FakeNvml]] = {
    "healthy_a100": _healthy_a100,
    "old_driver_410": _old_driver_410,
    "driver_library_mismatch": _driver_library_mismatch,
    "driver_not_loaded": _driver_not_loaded,
    "library_not_found": _library_not_found,
    "not_supported": _not_supported,
    "gpu_lost": _gpu_lost,
    "mig": _mig,
    "no_gpu": _no_gpu,
}


def scenario_library(name: str) -> FakeNvml:
    try:
        return SCENARIOS[name]()
    except KeyError:
        raise ValueError(f"unknown fake NVML scenario {name!r}; known: {', '.join(sorted(SCENARIOS))}") from None
