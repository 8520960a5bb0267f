"""The rung-5 findings from NVML evidence: each one from the scenario that shows it, and its silence elsewhere."""

from __future__ import annotations

import pytest
from nvml_helpers import JOB_PID, codes, diagnose_run, sample_fake, sample_scenario, verdict_of

from gputriage.diagnosis.passes import explain_idle_gpu_below
from gputriage.findings import Finding, Severity
from gputriage.hardware.fake import GIB, REASON_SW_POWER_CAP, FakeClock, FakeNvml, FakeProcess
from gputriage.hardware.fake_scenarios import a100, busy
from gputriage.record import Run
from gputriage.rules import gpu as gpu_rules
from gputriage.rules.gpu import device_verdict, gpu_idle_summary


def only(diag_codes: list[str], code: str) -> int:
    return diag_codes.count(code)


def finding(scenario: str, code: str, **kw: object) -> Finding:
    diag = diagnose_run(sample_scenario(scenario, **kw))  # type: ignore[arg-type]
    matches = [f for f in diag.findings if f.code == code]
    assert len(matches) == 1, codes(diag)
    return matches[0]


def test_low_gpu_utilization_on_an_idle_gpu_holding_memory() -> None:
    f = finding("idle_memory_held", "low-gpu-utilization")
    assert f.severity is Severity.WARNING and f.rung == 5
    assert f.evidence["util_zero_pct_of_samples"] == 100.0
    assert f.evidence["util_source"] == "driver_samples"
    assert f.evidence["pid"] == JOB_PID and f.evidence["used_memory_bytes"] == 76 * GIB
    assert f.title == (
        "GPU 0 was busy 0% of the time and at 0% in 100% of samples "
        "while python train.py --epochs 90 (pid 4242) held 76.0 GiB"
    )
    assert "gputriage run --out gputriage-out/ train.py" in f.fix


def test_gpu_idle_summary_gives_other_rules_the_numbers() -> None:
    run = Run(command="run", gpu=sample_scenario("idle_memory_held"))
    summary = gpu_idle_summary(run)
    assert summary is not None
    assert summary["gpu"] == 0 and summary["util_zero_pct_of_samples"] == 100.0
    assert summary["job_memory_max_bytes"] == 76 * GIB
    assert gpu_idle_summary(Run(command="run", gpu=sample_scenario("busy_a100"))) is None
    assert gpu_idle_summary(Run(command="run")) is None


@pytest.mark.parametrize(
    ("code", "rung"),
    [("model-on-cpu", 3), ("input-pipeline-bound", 5)],
    ids=["lower-rung", "starved-input-pipeline"],
)
def test_a_lower_finding_explains_the_idle_gpu_and_cites_nvml(code: str, rung: int) -> None:
    run = Run(command="run", gpu=sample_scenario("idle_memory_held"))
    (low,) = gpu_rules.low_gpu_utilization(run)  # the rule alone fires
    lower = Finding(code, rung, Severity.CRITICAL, "the lower cause")
    out = explain_idle_gpu_below(run, [lower, low])
    assert [f.code for f in out] == [code]
    assert out[0].evidence["nvml_gpu_util_zero_pct_of_samples"] == 100.0
    assert out[0].evidence["nvml_gpu"] == "0 (NVIDIA A100-SXM4-80GB)"
    # An info finding explains nothing: the idle GPU stays a finding of its own.
    info = Finding(code, rung, Severity.INFO, "not a cause")
    assert [f.code for f in explain_idle_gpu_below(run, [info, low])] == [code, "low-gpu-utilization"]


def test_low_gpu_utilization_only_when_the_job_is_meant_for_the_gpu() -> None:
    section = sample_scenario("idle_memory_held")
    assert "low-gpu-utilization" not in codes(diagnose_run(section, expect_device="meta"))
    assert "low-gpu-utilization" in codes(diagnose_run(section, expect_device="cuda:0"))


def test_a_job_that_never_reached_the_gpu_gets_no_rung5_finding() -> None:
    # The job (pid 777) is not on the GPU at all: lower rungs say why; rung 5 does not blame someone else's process.
    section = sample_scenario("other_process_hog", root_pid=777)
    assert codes(diagnose_run(section)) == []


def test_100_percent_util_with_idle_sms_is_explained() -> None:
    f = finding("h100_sm_gap", "low-gpu-utilization")
    assert f.title == "GPU 0 shows 100% utilization, but only 9% of its SMs were active"
    assert f.evidence["sm_active_mean_pct"] == 9.0 and f.evidence["tensor_active_mean_pct"] == 2.0
    assert "at least one kernel ran" in f.evidence["meaning"]
    assert "torch.compile" in f.fix


def test_gpm_gap_on_every_rank_of_an_8_gpu_job() -> None:
    diag = diagnose_run(sample_scenario("eight_gpus", root_pid=5000, with_ranks=True))
    gaps = [f for f in diag.findings if f.code == "low-gpu-utilization"]
    assert sorted(f.evidence["gpu"] for f in gaps) == list(range(8))
    assert {f.evidence["sm_active_mean_pct"] for f in gaps} == {38.0}


def test_other_process_on_gpu_names_who_and_how_much() -> None:
    f = finding("other_process_hog", "other-process-on-gpu")
    assert f.severity is Severity.WARNING
    assert f.evidence["pid"] == 9001
    assert f.evidence["command"] == "python sweep.py --trial 17"
    assert f.evidence["used_memory_bytes"] == 58 * GIB
    assert f.evidence["sm_util_pct"] == 94.0
    assert f.evidence["job_memory_bytes"] == 14 * GIB
    assert (
        f.title
        == "Another process, python sweep.py --trial 17 (pid 9001), holds 58.0 GiB on GPU 0 and uses 94% of the SMs"
    )
    assert "nvidia-smi --query-compute-apps" in f.fix


def test_a_small_idle_neighbour_is_info() -> None:
    clock = FakeClock()
    procs = [FakeProcess(JOB_PID, 30 * GIB, "python train.py", ppid=1), FakeProcess(777, 2 * GIB, "jupyter", ppid=1)]
    section = sample_fake(FakeNvml([a100(0, processes=procs, **busy())], clock=clock), clock)
    (f,) = [f for f in diagnose_run(section).findings if f.code == "other-process-on-gpu"]
    assert f.severity is Severity.INFO and f.evidence["pid"] == 777


def test_gpu_throttled_by_heat() -> None:
    f = finding("thermal_throttle", "gpu-throttled")
    assert f.severity is Severity.WARNING
    assert f.evidence["reason"] == "hw_thermal"
    assert f.evidence["temperature_max_c"] == 88
    assert f.evidence["clock_pct_of_max"] == 55.4
    assert "TEMPERATURE" in f.fix


def test_gpu_throttled_by_a_lowered_power_cap() -> None:
    f = finding("power_cap", "gpu-throttled")
    assert f.severity is Severity.WARNING
    assert (f.evidence["reason"], f.evidence["power_limit_w"], f.evidence["clock_pct_of_max"]) == (
        "power_cap",
        150.0,
        71.3,
    )
    assert f.title == "GPU 0 was slowed by its power cap in 100% of samples (SM clock 1005 of 1410 MHz)"
    assert "nvidia-smi -i 0 -pl" in f.fix


def test_a_busy_board_at_its_power_limit_with_full_clocks_is_only_info() -> None:
    clock = FakeClock()
    dev = a100(0, processes=[FakeProcess(JOB_PID, 30 * GIB, "python train.py")], **busy())
    dev.clock_event_reasons, dev.sm_clock_mhz = REASON_SW_POWER_CAP, 1275  # 90% of 1410 MHz
    (f,) = [
        f for f in diagnose_run(sample_fake(FakeNvml([dev], clock=clock), clock)).findings if f.code == "gpu-throttled"
    ]
    assert f.severity is Severity.INFO


def test_memory_nearly_full() -> None:
    f = finding("idle_memory_held", "gpu-memory-nearly-full")
    assert f.severity is Severity.INFO  # 95.75%: the caching allocator's reservation, a risk but not yet a limit
    assert f.evidence["memory_used_max_pct"] == 95.75
    assert f.title == "GPU 0's memory was 96% full (76.6 GiB of 80.0 GiB)"
    clock = FakeClock()
    dev = a100(0, memory_used_bytes=int(79 * GIB), processes=[FakeProcess(JOB_PID, 79 * GIB, "python train.py")])
    (g,) = [
        f
        for f in diagnose_run(sample_fake(FakeNvml([dev], clock=clock), clock)).findings
        if f.code == "gpu-memory-nearly-full"
    ]
    assert g.severity is Severity.WARNING


def test_a_healthy_busy_gpu_has_no_rung5_finding() -> None:
    diag = diagnose_run(sample_scenario("busy_a100"))
    assert codes(diag) == []
    assert diag.verdict.status == "healthy"


@pytest.mark.parametrize(
    ("scenario", "verdict"),
    [
        ("healthy_a100", "idle: no process"),
        ("idle_memory_held", "idle while python train.py --epochs 90 (pid 4242) holds 76.0 GiB"),
        ("other_process_hog", "busy: 100% util by python sweep.py --trial 17 (pid 9001)"),
        ("power_cap", "throttled: power cap (1005 of 1410 MHz)"),
        ("thermal_throttle", "throttled: thermal slowdown (hardware) (1395 of 2520 MHz)"),
        ("h100_sm_gap", "busy on paper: 100% util, but only 9% of SMs active"),
        ("busy_a100", "busy: 99% util by python train.py --epochs 90 (pid 4242)"),
    ],
)
def test_device_verdicts(scenario: str, verdict: str) -> None:
    assert verdict_of(sample_scenario(scenario)) == verdict


def test_verdicts_for_lost_and_mig_gpus() -> None:
    lost = sample_scenario("gpu_lost").devices[1]
    assert device_verdict(lost).startswith("lost: GPU is lost")
    mig = sample_scenario("mig").devices[0]
    assert device_verdict(mig).startswith("in use by python train.py --epochs 90 (pid 4242); utilisation unavailable")


def test_the_record_with_gpu_evidence_survives_a_json_round_trip(tmp_path: object) -> None:
    from pathlib import Path

    from gputriage.record import load_run, save_run

    run = Run(command="run", gpu=sample_scenario("other_process_hog"))
    path = Path(str(tmp_path)) / "run.json"
    save_run(run, path)
    again = load_run(path)
    assert again.gpu == run.gpu
    assert codes(diagnose_run(again.gpu)) == codes(diagnose_run(run.gpu))  # type: ignore[arg-type]
