"""Drive the sampler over a fake scenario with a fake clock, as `run` would over a real job."""

from __future__ import annotations

from gputriage.diagnosis import Diagnosis, diagnose, gpu_device_verdicts
from gputriage.hardware.fake import FakeClock, FakeNvml
from gputriage.hardware.fake_scenarios import scenario_library
from gputriage.hardware.nvml import open_nvml
from gputriage.hardware.sampler import GpuSampler, JobSpec
from gputriage.record import Run
from gputriage.record.gpu import GpuSection

JOB_PID = 4242


def sample_fake(
    lib: FakeNvml,
    clock: FakeClock,
    *,
    seconds: float = 6.0,
    interval_s: float = 0.2,
    root_pid: int | None = JOB_PID,
    with_ranks: bool = False,
    cuda_visible_devices: str | None = None,
    max_samples: int = 600,
) -> GpuSection:
    """Tick the sampler every `interval_s` fake seconds for `seconds`, then stop it and return the section."""
    with open_nvml(lib) as session:
        sampler = GpuSampler(
            session,
            interval_s=interval_s,
            clock=clock,
            job=JobSpec(root_pid=root_pid, with_ranks=with_ranks) if root_pid is not None else None,
            cuda_visible_devices=cuda_visible_devices,
            max_samples=max_samples,
        )
        for _ in range(round(seconds / interval_s)):
            sampler.tick()
            clock.advance(interval_s)
        sampler.stop()
        section = sampler.section()
    return section


def sample_scenario(name: str, **kw: object) -> GpuSection:
    clock = FakeClock()
    return sample_fake(scenario_library(name, clock), clock, **kw)  # type: ignore[arg-type]


def diagnose_run(section: GpuSection, expect_device: str | None = None) -> Diagnosis:
    """A `run`-like record that carries only the GPU evidence, through every registered rule."""
    return diagnose(Run(command="run", expect_device=expect_device, gpu=section))


def codes(diag: Diagnosis) -> list[str]:
    return [f.code for f in diag.findings]


def verdict_of(section: GpuSection, index: int = 0) -> str | None:
    """The one-line state the diagnosis gives the GPU with this NVML index."""
    return gpu_device_verdicts(section).get(index)
