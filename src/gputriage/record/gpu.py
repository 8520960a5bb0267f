"""Rung-5 evidence from the GPU itself (NVML), sampled during the run or once by `watch`."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GpuSample:
    t_s: float  # seconds since the run started
    gpu_util_pct: float | None = None
    mem_util_pct: float | None = None
    memory_used_bytes: int | None = None


@dataclass
class GpuTrack:
    index: int  # NVML index
    name: str | None = None
    memory_total_bytes: int | None = None
    samples: list[GpuSample] = field(default_factory=list)


@dataclass
class GpuSection:
    available: bool = False
    unavailable_reason: str | None = None
    devices: list[GpuTrack] = field(default_factory=list)

    def self_check(self) -> list[str]:
        problems = []
        for dev in self.devices:
            times = [s.t_s for s in dev.samples]
            if times != sorted(times):
                problems.append(f"gpu {dev.index}: sample times are not monotonic")
        return problems
