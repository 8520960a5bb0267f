"""The sampler over the fake scenarios: what it reads, how often, and what it does when the driver says no."""

from __future__ import annotations

import time

import pytest
from nvml_helpers import JOB_PID, sample_fake, sample_scenario, verdict_of

from gputriage.hardware.fake import (
    GIB,
    REASON_SW_POWER_CAP,
    FakeClock,
    FakeDevice,
    FakeNvml,
    FakeProcess,
)
from gputriage.hardware.fake_scenarios import SCENARIOS, a100, scenario_library
from gputriage.hardware.nvml import open_nvml
from gputriage.hardware.sampler import GpuSampler, JobSpec


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_samples_without_raising(name: str) -> None:
    section = sample_scenario(name, seconds=2.0)
    assert section.self_check() == []
    if section.available:
        assert all(verdict_of(section, t.index) for t in section.devices)
    else:
        assert section.unavailable_reason


def test_idle_gpu_with_memory_held() -> None:
    section = sample_scenario("idle_memory_held")
    (track,) = section.devices
    s = track.summary
    assert s.util_source == "driver_samples"
    assert s.util_zero_pct_of_samples == 100.0
    assert s.memory_used_max_pct == 95.75
    assert s.job_memory_max_bytes == 76 * GIB
    (proc,) = track.processes
    assert (proc.pid, proc.role, proc.is_job, proc.command) == (JOB_PID, "main", True, "python train.py --epochs 90")
    assert section.job_pids == [JOB_PID]
    assert verdict_of(section) == "idle while python train.py --epochs 90 (pid 4242) holds 76.0 GiB"


def test_time_varying_utilisation_is_read_from_the_driver_history() -> None:
    # Busy half of every second (one value per driver period of 1/6 s). Polling once a second always lands on the
    # idle half and would report 0%; the driver's own history has all 18 readings of 3 s, 9 at 0% and 9 at 100%.
    clock = FakeClock()
    dev = a100(0, util_pattern=(0, 0, 0, 100, 100, 100))
    section = sample_fake(FakeNvml([dev], clock=clock), clock, seconds=3.0, interval_s=1.0, root_pid=None)
    track = section.devices[0]
    assert [x.gpu_util_pct for x in track.samples] == [0.0, 0.0, 0.0, 0.0]
    s = track.summary
    assert s.util_source == "driver_samples"
    assert s.util_sample_count == 18
    assert s.util_mean_pct == 50.0
    assert s.util_zero_pct_of_samples == 50.0
    assert s.window_s == 3.0


def test_polled_utilisation_when_the_driver_keeps_no_history() -> None:
    clock = FakeClock()
    # Polls at 0, 0.5, ... 2.5 s land on driver periods 0, 3, ... 15: busy, idle, busy, idle, busy, idle.
    dev = a100(0, util_pattern=(100, 100, 100, 0, 0, 0), not_supported={"nvmlDeviceGetSamples"})
    section = sample_fake(FakeNvml([dev], clock=clock), clock, seconds=2.5, interval_s=0.5, root_pid=None)
    track = section.devices[0]
    assert track.summary.util_source == "polled"
    assert track.summary.util_sample_count == 6
    assert track.summary.util_mean_pct == 50.0
    assert track.unavailable["util_history"] == "Not Supported"


def test_process_lists_are_read_at_most_once_a_second() -> None:
    clock = FakeClock()
    lib = scenario_library("busy_a100", clock)
    sample_fake(lib, clock, seconds=5.0, interval_s=0.1)
    fast = lib.call_counts["nvmlDeviceGetUtilizationRates"]
    slow = lib.call_counts["nvmlDeviceGetComputeRunningProcesses"]
    assert fast == 51  # 50 ticks and the last one at stop()
    assert slow == 6  # t = 0, 1, 2, 3, 4 s and the last one at stop()
    assert lib.call_counts["nvmlDeviceGetPcieThroughput"] == 2 * slow
    assert lib.call_counts["nvmlDeviceGetSamples"] == slow


def test_samples_are_decimated_but_statistics_cover_every_tick() -> None:
    clock = FakeClock()
    dev = a100(0, util_pattern=(10,), not_supported={"nvmlDeviceGetSamples"})
    section = sample_fake(FakeNvml([dev], clock=clock), clock, seconds=100.0, interval_s=0.5, max_samples=16)
    track = section.devices[0]
    assert len(track.samples) <= 16
    assert track.summary.sample_count == 201
    assert track.summary.util_sample_count == 201
    times = [s.t_s for s in track.samples]
    assert times == sorted(times) and times[0] == 0.0


def test_old_driver_falls_back_and_names_what_is_missing() -> None:
    section = sample_scenario("old_driver_410")
    track = section.devices[0]
    # ...ClocksEventReasons is missing, the older ...ThrottleReasons answers the same bits.
    assert track.samples[-1].throttle_reasons == []
    assert "throttle_reasons" not in track.unavailable
    assert track.unavailable["compute_processes"] == "Function Not Found"
    assert "gpm" in track.unavailable
    assert track.processes == []
    assert track.summary.util_mean_pct is not None


def test_a_gpu_lost_during_the_run_is_reported_as_lost() -> None:
    clock = FakeClock()
    dev = a100(0, util_pattern=(100,), lost_after_s=2.0, processes=[FakeProcess(JOB_PID, 10 * GIB, "python x.py")])
    lib = FakeNvml([dev], clock=clock)
    section = sample_fake(lib, clock, seconds=5.0, interval_s=0.5)
    track = section.devices[0]
    assert track.lost and track.error == "GPU is lost"
    assert track.summary.sample_count == 4  # t = 0, 0.5, 1.0, 1.5 s; nothing after the GPU fell off the bus
    assert (verdict_of(section) or "").startswith("lost: GPU is lost")
    # The tick at 2.0 s found the board gone on its first call; no later tick asked it again (calls on a lost GPU
    # can block for seconds).
    assert lib.call_counts["nvmlDeviceGetUtilizationRates"] == 5
    assert lib.call_counts["nvmlDeviceGetMemoryInfo"] == 1 + 4  # open, then the four ticks before the loss


def test_a_gpu_lost_before_the_run_answers_nothing() -> None:
    section = sample_scenario("gpu_lost")
    healthy, lost = section.devices
    assert not healthy.lost and healthy.summary.sample_count > 0
    assert lost.lost and lost.samples == [] and lost.name is None


def test_dataloader_workers_are_part_of_the_job() -> None:
    clock = FakeClock()
    procs = [
        FakeProcess(JOB_PID, 20 * GIB, "python train.py", ppid=1),
        FakeProcess(4300, 300 * 1024**2, "python train.py", ppid=JOB_PID),  # a worker that touched CUDA
        FakeProcess(9001, 2 * GIB, "python notebook.py", ppid=1),
    ]
    section = sample_fake(FakeNvml([a100(0, processes=procs)], clock=clock), clock, seconds=1.0)
    roles = {p.pid: p.role for p in section.devices[0].processes}
    assert roles == {JOB_PID: "main", 4300: "worker", 9001: None}
    assert section.devices[0].summary.job_memory_max_bytes == 20 * GIB + 300 * 1024**2


def test_torchrun_siblings_are_ranks_and_visible_devices_choose_the_gpus() -> None:
    clock = FakeClock()
    lib = scenario_library("eight_gpus", clock)
    section = sample_fake(lib, clock, seconds=1.0, root_pid=5003, with_ranks=True, cuda_visible_devices="3,4")
    assert [(t.index, t.cuda_index) for t in section.devices] == [(3, 0), (4, 1)]
    assert [p.role for t in section.devices for p in t.processes] == ["main", "rank 4"]
    assert section.job_pids == [5003, 5004]


def test_cuda_visible_devices_that_hides_everything() -> None:
    section = sample_scenario("busy_a100", cuda_visible_devices="7")
    assert not section.available
    assert (
        section.unavailable_reason == "CUDA_VISIBLE_DEVICES='7' leaves no GPU visible (CUDA ignores: 7 (no such GPU))"
    )


def test_mig_instance_memory_and_no_utilisation() -> None:
    section = sample_scenario("mig", cuda_visible_devices="MIG-4f3c1a2b-77d0-5e1f-9a8b-000000000000")
    (track,) = section.devices
    assert track.mig_uuid == "MIG-4f3c1a2b-77d0-5e1f-9a8b-000000000000"
    assert track.memory_total_bytes == 40 * GIB  # the instance, not the whole board
    assert track.summary.util_mean_pct is None
    assert "MIG mode" in track.unavailable["gpu_util_pct"]
    assert track.processes[0].role == "main"


def test_gpm_metrics_on_hopper() -> None:
    section = sample_scenario("h100_sm_gap")
    s = section.devices[0].summary
    assert (s.sm_active_mean_pct, s.sm_occupancy_mean_pct, s.tensor_active_mean_pct, s.dram_active_mean_pct) == (
        9.0,
        4.0,
        2.0,
        6.0,
    )
    assert section.devices[0].samples[0].sm_active_pct is None  # GPM needs two samples: the first tick has none


def test_throttle_reasons_are_counted_per_sample() -> None:
    clock = FakeClock()
    dev = a100(0, util_pattern=(100,), clock_event_reasons=REASON_SW_POWER_CAP)
    section = sample_fake(FakeNvml([dev], clock=clock), clock, seconds=2.0, root_pid=None)
    assert section.devices[0].summary.throttle_pct_of_samples == {"power_cap": 100.0}


def test_not_supported_metrics_keep_their_reason_and_are_not_asked_again() -> None:
    clock = FakeClock()
    lib = scenario_library("not_supported", clock)
    section = sample_fake(lib, clock, seconds=3.0)
    track = section.devices[0]
    assert track.unavailable["pcie"] == "Not Supported"
    assert track.unavailable["process_util"] == "Not Supported"
    assert lib.call_counts["nvmlDeviceGetPcieThroughput"] == 1
    assert track.samples[-1].pcie_tx_bytes_per_s is None


def test_the_background_thread_samples_and_stops() -> None:
    lib = scenario_library("busy_a100")  # the real clock: the thread really runs
    with open_nvml(lib) as session:
        sampler = GpuSampler(session, interval_s=0.1, job=JobSpec(root_pid=JOB_PID))
        sampler.start()
        time.sleep(0.35)
        sampler.stop()
        assert sampler._thread is None
        section = sampler.section()
    assert section.available
    assert section.devices[0].summary.sample_count >= 1
    assert section.devices[0].processes[0].role == "main"


def test_no_nvml_means_a_reason_not_an_exception() -> None:
    section = sample_scenario("driver_library_mismatch")
    assert not section.available
    assert section.unavailable_reason == "Driver/library version mismatch"
    assert section.devices == []


def test_fake_job_pid_can_be_this_process() -> None:
    lib = scenario_library("idle_memory_held", job_pid=12345)
    assert [p.pid for p in lib.devices[0].processes] == [12345]
    assert lib.process_table.command(12345) == "python train.py --epochs 90"


def test_fake_devices_take_every_state_the_scenarios_use() -> None:
    # Guards the scenarios' keyword use: a typo in a FakeDevice field would raise here, not in a test far away.
    for build in SCENARIOS.values():
        assert isinstance(build(), FakeNvml)
    assert FakeDevice("x", "GPU-x", GIB, (9, 0)).util_at(10.0) == 0


def test_a_binding_that_raises_something_else_loses_that_gpu_not_the_run() -> None:
    clock = FakeClock()
    lib = scenario_library("busy_a100", clock)

    def broken(handle: object, sensor: int) -> int:
        raise TypeError("argument 2: wrong type")  # what ctypes raises on a binding/driver ABI slip

    lib.nvmlDeviceGetTemperature = broken  # type: ignore[method-assign]
    section = sample_fake(lib, clock, seconds=1.0)
    track = section.devices[0]
    assert track.error == "gputriage could not read this GPU: TypeError: argument 2: wrong type"
    assert verdict_of(section) == f"unreadable: {track.error}"
