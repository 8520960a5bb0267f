"""The one module that talks to NVML (through `nvidia-ml-py`, imported as `pynvml`).

Everything goes through `NvmlSession.query`, which never raises into callers: an NVML error, a function the driver
or the binding lacks, or a lost GPU becomes an `Unavailable` value with the reason. The tests swap the library for the
fake in `gputriage.hardware.fake` (also selectable with GPUTRIAGE_FAKE_NVML=<scenario> for demos and docs).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec

from gputriage import envnames
from gputriage.errors import InputError
from gputriage.record.environment import DriverFacts, GpuDevice


class Unavailable(msgspec.Struct, frozen=True):
    """A metric or call that could not be read, and why (nvitop's NA, with the reason kept)."""

    reason: str
    code: int | None = None  # the NVML error code, when NVML gave one

    def __str__(self) -> str:
        return f"unavailable ({self.reason})"


def _load_library() -> Any:
    """The real binding, or the fake scenario named in GPUTRIAGE_FAKE_NVML (InputError for a name it does not know,
    or a GPUTRIAGE_FAKE_JOB_PID that is neither "self" nor a process id)."""
    scenario = os.environ.get(envnames.FAKE_NVML)
    if scenario:
        from gputriage.hardware.fake_scenarios import scenario_library

        check_fake_scenario(scenario)
        return scenario_library(scenario, job_pid=fake_job_pid(os.environ.get(envnames.FAKE_JOB_PID)))
    import pynvml

    return pynvml


def fake_scenario_names() -> list[str]:
    from gputriage.hardware.fake_scenarios import SCENARIOS

    return sorted(SCENARIOS)


def check_fake_scenario(name: str) -> None:
    """InputError unless `name` is one of the fake scenarios (hardware/fake_scenarios.py)."""
    if name not in fake_scenario_names():
        known = ", ".join(fake_scenario_names())
        raise InputError(f"{envnames.FAKE_NVML}={name!r}: no such fake NVML scenario; one of {known}")


def fake_job_pid(value: str | None) -> int | None:
    """GPUTRIAGE_FAKE_JOB_PID: "self" is this process; unset or empty, the scenario's own job pid."""
    if not value:
        return None
    if value == "self":
        return os.getpid()
    if value.isdigit() and int(value) > 0:
        return int(value)
    raise InputError(f"{envnames.FAKE_JOB_PID}={value!r}: expected 'self' or a process id")


class NvmlSession:
    """An initialised NVML, or the reason it could not be initialised."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.init_error: Unavailable | None = None
        try:
            lib.nvmlInit()
        except lib.NVMLError as exc:
            self.init_error = _unavailable(exc)
        except OSError as exc:  # a broken libnvidia-ml.so can fail to load with an OS error
            self.init_error = Unavailable(f"cannot load libnvidia-ml: {exc}")

    @property
    def ok(self) -> bool:
        return self.init_error is None

    def query(self, fn_name: str, *args: Any) -> Any:
        """Call `lib.<fn_name>(*args)`; return its value, or `Unavailable(reason)` instead of raising."""
        if self.init_error is not None:
            return self.init_error
        fn = getattr(self.lib, fn_name, None)
        if fn is None:
            return Unavailable(f"{fn_name} is not in this nvidia-ml-py")
        try:
            return fn(*args)
        except self.lib.NVMLError as exc:
            return _unavailable(exc)

    def close(self) -> None:
        if self.ok:
            # Shutting down a half-broken NVML must not hide the diagnosis already made.
            with contextlib.suppress(self.lib.NVMLError):
                self.lib.nvmlShutdown()


@contextmanager
def open_nvml(lib: Any | None = None) -> Iterator[NvmlSession]:
    """Open NVML (the real one unless `lib` or GPUTRIAGE_FAKE_NVML says otherwise) and always close it."""
    if lib is None:
        try:
            lib = _load_library()
        except ImportError as exc:
            session = NvmlSession.__new__(NvmlSession)
            session.lib = None
            session.init_error = Unavailable(f"nvidia-ml-py is not installed ({exc})")
            yield session
            return
    session = NvmlSession(lib)
    try:
        yield session
    finally:
        session.close()


def _unavailable(exc: Any) -> Unavailable:
    code = getattr(exc, "value", None)
    return Unavailable(str(exc) or f"NVML error {code}", code)


def _text(value: Any) -> Any:
    # nvidia-ml-py returns str since 11.x, bytes before; accept both.
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _ok(value: Any) -> bool:
    return not isinstance(value, Unavailable)


def read_driver(session: NvmlSession) -> DriverFacts:
    """Driver version, the highest CUDA it supports, and each device. Missing facts stay None."""
    if not session.ok:
        assert session.init_error is not None
        return DriverFacts(nvml_loaded=False, nvml_error=session.init_error.reason)
    facts = DriverFacts(nvml_loaded=True)
    version = session.query("nvmlSystemGetDriverVersion")
    if _ok(version):
        facts.driver_version = _text(version)
    cuda = session.query("nvmlSystemGetCudaDriverVersion")
    if _ok(cuda):
        facts.cuda_driver_version = cuda_version_text(int(cuda))
    count = session.query("nvmlDeviceGetCount")
    if not _ok(count):
        facts.nvml_error = count.reason
        return facts
    for index in range(int(count)):
        facts.devices.append(read_device(session, index))
    return facts


def read_device(session: NvmlSession, index: int) -> GpuDevice:
    handle = session.query("nvmlDeviceGetHandleByIndex", index)
    if not _ok(handle):
        return GpuDevice(index=index, name=f"GPU {index}", error=handle.reason)
    name = session.query("nvmlDeviceGetName", handle)
    if not _ok(name):
        # A lost GPU (Xid 79) still counts in NVML but answers nothing; keep it visible with the reason.
        return GpuDevice(index=index, name=f"GPU {index}", error=name.reason)
    device = GpuDevice(index=index, name=_text(name))
    uuid = session.query("nvmlDeviceGetUUID", handle)
    device.uuid = _text(uuid) if _ok(uuid) else None
    memory = session.query("nvmlDeviceGetMemoryInfo", handle)
    device.memory_total_bytes = int(memory.total) if _ok(memory) else None
    cc = session.query("nvmlDeviceGetCudaComputeCapability", handle)
    device.compute_capability = f"{cc[0]}.{cc[1]}" if _ok(cc) else None
    pci = session.query("nvmlDeviceGetPciInfo", handle)
    device.pci_bus_id = _text(pci.busId) if _ok(pci) else None
    mig = session.query("nvmlDeviceGetMigMode", handle)
    device.mig_mode = bool(mig[0]) if _ok(mig) else None
    return device


def nvidia_gpu_count() -> int:
    """How many GPUs NVML sees on this machine (0 when NVML cannot start). Never raises."""
    with open_nvml() as session:
        count = session.query("nvmlDeviceGetCount")
    return int(count) if _ok(count) else 0


def cuda_version_text(encoded: int) -> str:
    """NVML encodes CUDA versions as 1000*major + 10*minor (12020 -> "12.2")."""
    return f"{encoded // 1000}.{(encoded % 1000) // 10}"
