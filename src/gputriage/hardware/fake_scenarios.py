"""Named fake-NVML scenarios, each taken from a kind of report people file about an "idle" or slow GPU.

PIDs and command lines are invented but shaped like the reports: `python train.py` is the user's job (pid 4242).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputriage.hardware.fake import (
    GIB,
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_GPM_METRIC_ANY_TENSOR_UTIL,
    NVML_GPM_METRIC_DRAM_BW_UTIL,
    NVML_GPM_METRIC_SM_OCCUPANCY,
    NVML_GPM_METRIC_SM_UTIL,
    REASON_GPU_IDLE,
    REASON_HW_SLOWDOWN,
    REASON_HW_THERMAL,
    REASON_SW_POWER_CAP,
    REASON_SW_THERMAL,
    FakeDevice,
    FakeNvml,
    FakeProcess,
)

JOB_PID = 4242
JOB_COMMAND = "python train.py --epochs 90"
# A busy training job's utilisation, one value per driver period: mostly saturated, with brief dips at step edges.
BUSY_PATTERN = (100, 100, 98, 100, 100, 97, 100, 100, 99, 100, 100, 96)


def a100(index: int = 0, **kw: Any) -> FakeDevice:
    return FakeDevice(
        name="NVIDIA A100-SXM4-80GB",
        uuid=f"GPU-a100{index:04d}-5d2c-4e1b-9c1e-8a7f3b2c{index:04d}",
        memory_total_bytes=80 * GIB,
        compute_capability=(8, 0),
        pci_bus_id=f"00000000:{0x10 + index:02X}:00.0",
        **kw,
    )


def h100(index: int = 0, **kw: Any) -> FakeDevice:
    defaults: dict[str, Any] = {"power_limit_mw": 700_000, "max_sm_clock_mhz": 1980, "mem_clock_mhz": 2619}
    defaults.update(kw)
    return FakeDevice(
        name="NVIDIA H100 80GB HBM3",
        uuid=f"GPU-h100{index:04d}-7a1e-4c2d-8b3f-2e9d6c1a{index:04d}",
        memory_total_bytes=80 * GIB,
        compute_capability=(9, 0),
        pci_bus_id=f"00000000:{0x18 + 0x10 * index:02X}:00.0",
        **defaults,
    )


def job(memory_bytes: int, sm_util_pct: int | None = None, **kw: Any) -> FakeProcess:
    return FakeProcess(JOB_PID, memory_bytes, command=JOB_COMMAND, sm_util_pct=sm_util_pct, ppid=1, **kw)


def busy(**kw: Any) -> dict[str, Any]:
    """Live state of a GPU that trains at full clocks."""
    state: dict[str, Any] = {
        "util_pattern": BUSY_PATTERN,
        "mem_util_pattern": (41, 44, 38, 45),
        "power_mw": 352_000,
        "sm_clock_mhz": 1410,
        "temperature_c": 63,
        "clock_event_reasons": 0,
        "pcie_tx_kb_per_s": 1_200,
        "pcie_rx_kb_per_s": 48_000,
    }
    state.update(kw)
    return state


def _healthy_a100() -> FakeNvml:
    # An idle, empty board: what rung 1 sees on a working machine before the job starts.
    return FakeNvml([a100(0)])


def _busy_a100() -> FakeNvml:
    return FakeNvml([a100(0, memory_used_bytes=61 * GIB, processes=[job(61 * GIB, 97)], **busy())])


def _idle_memory_held() -> FakeNvml:
    # The classic: nvidia-smi shows "Memory-Usage 78GiB / 80GiB, GPU-Util 0%". The caching allocator holds the memory
    # while the job computes on the CPU, waits for data, or sits in a debugger.
    proc = job(76 * GIB, 0)
    return FakeNvml([a100(0, memory_used_bytes=int(76.6 * GIB), processes=[proc], temperature_c=36, power_mw=63_000)])


def _other_process_hog() -> FakeNvml:
    # A shared workstation: someone's experiment holds most of the memory and the SMs; our job crawls next to it.
    other = FakeProcess(9001, 58 * GIB, command="python sweep.py --trial 17", sm_util_pct=94, ppid=1)
    state = busy(util_pattern=(100,), power_mw=388_000)
    procs = [job(14 * GIB, 4), other]
    return FakeNvml([a100(0, memory_used_bytes=72 * GIB + 700 * 1024**2, processes=procs, **state)])


def _thermal_throttle() -> FakeNvml:
    # A workstation card in a hot case: clocks pulled down by the thermal slowdown, 88 C at full load.
    dev = FakeDevice(
        name="NVIDIA GeForce RTX 4090",
        uuid="GPU-4090beef-3c1d-4a2b-9e8f-7d6c5b4a3921",
        memory_total_bytes=24 * GIB,
        compute_capability=(8, 9),
        pci_bus_id="00000000:01:00.0",
        memory_used_bytes=19 * GIB,
        processes=[job(19 * GIB, 99)],
        power_limit_mw=450_000,
        max_sm_clock_mhz=2520,
        mem_clock_mhz=10_501,
        **busy(
            power_mw=301_000,
            sm_clock_mhz=1395,
            temperature_c=88,
            clock_event_reasons=REASON_SW_THERMAL | REASON_HW_THERMAL | REASON_HW_SLOWDOWN,
        ),
    )
    return FakeNvml([dev], driver_version="550.120", cuda_driver_version=12040)


def _power_cap() -> FakeNvml:
    # `nvidia-smi -pl 150` on a 250 W A100 PCIe (a shared-rack policy): the board sits at its cap, clocks far below max.
    dev = FakeDevice(
        name="NVIDIA A100-PCIE-40GB",
        uuid="GPU-a1004c1e-60aa-4b2c-8d1e-9f0a1b2c3d4e",
        memory_total_bytes=40 * GIB,
        compute_capability=(8, 0),
        pci_bus_id="00000000:3B:00.0",
        memory_used_bytes=31 * GIB,
        processes=[job(31 * GIB, 99)],
        power_limit_mw=150_000,
        max_sm_clock_mhz=1410,
        mem_clock_mhz=1215,
        **busy(power_mw=149_000, sm_clock_mhz=1005, temperature_c=58, clock_event_reasons=REASON_SW_POWER_CAP),
    )
    return FakeNvml([dev])


def _old_driver_410() -> FakeNvml:
    # pytorch#31243: driver 410.48 only supports CUDA 10.0. That libnvidia-ml predates nvmlSystemGetCudaDriverVersion
    # (418-era), the clock-event API (it only has ...ThrottleReasons), the v2/v3 process lists that current bindings
    # call (so the process list is unavailable), and GPM. The binding raises FUNCTION_NOT_FOUND for each.
    dev = FakeDevice(
        name="Tesla V100-SXM2-16GB",
        uuid="GPU-0b1a6b1e-8f53-2a1c-7f0e-3c5d9e7a1b2c",
        memory_total_bytes=16 * GIB,
        compute_capability=(7, 0),
        memory_used_bytes=9 * GIB,
        processes=[job(9 * GIB)],
        power_limit_mw=300_000,
        max_sm_clock_mhz=1530,
        mem_clock_mhz=877,
        **busy(power_mw=221_000, sm_clock_mhz=1530),
    )
    missing = {
        "nvmlSystemGetCudaDriverVersion",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetGraphicsRunningProcesses",
        "nvmlGpmQueryDeviceSupport",
        "nvmlGpmSampleAlloc",
        "nvmlGpmSampleGet",
        "nvmlGpmMetricsGet",
    }
    return FakeNvml([dev], driver_version="410.48", cuda_driver_version=10000, missing_functions=missing)


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
        not_supported={
            "nvmlDeviceGetMigMode",
            "nvmlDeviceGetPciInfo",
            "nvmlDeviceGetPcieThroughput",
            "nvmlDeviceGetProcessUtilization",
        },
        power_limit_mw=350_000,
        max_sm_clock_mhz=2100,
    )
    return FakeNvml([dev], driver_version="535.104.05", cuda_driver_version=12020)


def _gpu_lost() -> FakeNvml:
    # "GPU has fallen off the bus" (Xid 79): NVML still lists the board, but every query on it fails.
    return FakeNvml([a100(0), a100(1, lost=True)])


def _mig() -> FakeNvml:
    # An A100 split into MIG instances: the job runs in the first; NVML gives no utilisation in MIG mode.
    uuids = [f"MIG-4f3c1a2b-77d0-5e1f-9a8b-{i:012d}" for i in range(2)]
    dev = a100(0, mig_mode=1, mig_uuids=uuids, mig_memory_bytes=40 * GIB, memory_used_bytes=22 * GIB)
    dev.processes = [job(22 * GIB)]
    dev.power_mw, dev.sm_clock_mhz, dev.clock_event_reasons = 240_000, 1410, 0
    return FakeNvml([dev])


def _no_gpu() -> FakeNvml:
    return FakeNvml([])


def _eight_gpus() -> FakeNvml:
    # torchrun --nproc_per_node=8 on an HGX H100: ranks 0-7 each on their own GPU, 100% "util" everywhere, but GPM
    # shows the SMs only 38% active and the tensor cores at 21%: small kernels, far from the hardware's capacity.
    agent = FakeProcess(4200, None, command="torchrun --nproc_per_node=8 train.py", ppid=1)
    gpm = {
        NVML_GPM_METRIC_SM_UTIL: 38.0,
        NVML_GPM_METRIC_SM_OCCUPANCY: 22.0,
        NVML_GPM_METRIC_ANY_TENSOR_UTIL: 21.0,
        NVML_GPM_METRIC_DRAM_BW_UTIL: 31.0,
    }
    devices = []
    for rank in range(8):
        proc = FakeProcess(5000 + rank, 52 * GIB, command="/usr/bin/python3 -u train.py", sm_util_pct=95, ppid=4200)
        proc.rank = rank
        devices.append(
            h100(
                rank,
                memory_used_bytes=53 * GIB,
                processes=[proc],
                gpm_metrics=dict(gpm),
                **busy(util_pattern=(100,), power_mw=455_000, sm_clock_mhz=1980),
            )
        )
    return FakeNvml(devices, driver_version="550.90.07", extra_processes=[agent])


def _h100_sm_gap() -> FakeNvml:
    # A single H100 that nvidia-smi calls 100% busy, while GPM says 9% of the SMs are active: one tiny kernel at a
    # time (batch size 8, no torch.compile). The "100% and still slow" report.
    gpm = {
        NVML_GPM_METRIC_SM_UTIL: 9.0,
        NVML_GPM_METRIC_SM_OCCUPANCY: 4.0,
        NVML_GPM_METRIC_ANY_TENSOR_UTIL: 2.0,
        NVML_GPM_METRIC_DRAM_BW_UTIL: 6.0,
    }
    state = busy(util_pattern=(100,), power_mw=182_000, sm_clock_mhz=1980, clock_event_reasons=0)
    return FakeNvml([h100(0, memory_used_bytes=7 * GIB, processes=[job(6 * GIB, 100)], gpm_metrics=gpm, **state)])


def _idle_no_process() -> FakeNvml:
    dev = a100(0, clock_event_reasons=REASON_GPU_IDLE)
    return FakeNvml([dev])


SCENARIOS: dict[str, Callable[[], FakeNvml]] = {
    "healthy_a100": _healthy_a100,
    "busy_a100": _busy_a100,
    "idle_memory_held": _idle_memory_held,
    "idle_no_process": _idle_no_process,
    "other_process_hog": _other_process_hog,
    "thermal_throttle": _thermal_throttle,
    "power_cap": _power_cap,
    "old_driver_410": _old_driver_410,
    "driver_library_mismatch": _driver_library_mismatch,
    "driver_not_loaded": _driver_not_loaded,
    "library_not_found": _library_not_found,
    "not_supported": _not_supported,
    "gpu_lost": _gpu_lost,
    "mig": _mig,
    "no_gpu": _no_gpu,
    "eight_gpus": _eight_gpus,
    "h100_sm_gap": _h100_sm_gap,
}


def scenario_library(name: str, clock: Callable[[], float] | None = None, job_pid: int | None = None) -> FakeNvml:
    """A fresh fake for the named scenario (see `gputriage.hardware.fake_scenarios.SCENARIOS`).

    `job_pid` renumbers the scenario's job (pid 4242) so that a real process, e.g. a `gputriage run` under test, is
    recognised as the job; GPUTRIAGE_FAKE_JOB_PID=self does the same through the environment.
    """
    try:
        build = SCENARIOS[name]
    except KeyError:
        raise ValueError(f"unknown fake NVML scenario {name!r}; known: {', '.join(sorted(SCENARIOS))}") from None
    lib = build()
    lib.scenario = name
    if job_pid is not None:
        for proc in (p for d in lib.devices for p in d.processes):
            proc.pid = job_pid if proc.pid == JOB_PID else proc.pid
            proc.ppid = job_pid if proc.ppid == JOB_PID else proc.ppid
        lib.process_table = lib.rebuild_process_table()
    if clock is not None:
        lib.clock, lib.start_s = clock, clock()
    return lib
