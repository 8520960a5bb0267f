"""`run` with GPU evidence: the sampler observer fills `run.gpu`, and the report carries NVML's numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from nvml_helpers import codes

from gputriage.collectors.gpu_observer import GpuSamplerObserver
from gputriage.diagnosis import diagnose
from gputriage.hardware.fake import GIB, FakeClock
from gputriage.hardware.fake_scenarios import scenario_library
from gputriage.record import Run
from gputriage.report.document import build_document, run_from_document

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"


def test_observer_fills_the_gpu_section_and_the_findings_use_it() -> None:
    clock = FakeClock()
    lib = scenario_library("idle_memory_held", clock, job_pid=31337)
    observer = GpuSamplerObserver(lib=lib, clock=clock, environ={}, pid=31337, interval_s=3600)
    run = Run(command="run", expect_device="cuda")
    observer.start(run)
    assert observer.sampler is not None
    for _ in range(20):  # the thread waits an hour between ticks; the test ticks the fake clock itself
        clock.advance(0.5)
        observer.sampler.tick()
    observer.finish(run)
    assert run.gpu is not None and run.gpu.available
    (track,) = run.gpu.devices
    assert diagnose(run).device_verdicts[0] == "idle while python train.py --epochs 90 (pid 31337) holds 76.0 GiB"
    assert track.processes[0].role == "main"
    assert run.gpu.job_pids == [31337]
    diag = diagnose(run)
    assert codes(diag) == ["low-gpu-utilization", "gpu-memory-nearly-full"]
    low = diag.findings[0]
    # The driver's history: one reading per 1/6 s over the 10 fake seconds, whenever the thread's own tick came.
    assert low.evidence["util_zero_pct_of_samples"] == 100.0 and low.evidence["util_sample_count"] == 60
    # The report document is a saved run: the GPU evidence survives it, and re-renders to the same findings.
    again = run_from_document(json.loads(json.dumps(build_document(diag))))
    assert again.gpu == run.gpu
    assert codes(diagnose(again)) == codes(diag)


def test_observer_without_nvml_records_why() -> None:
    observer = GpuSamplerObserver(lib=scenario_library("driver_not_loaded"), environ={})
    run = Run(command="run")
    observer.start(run)
    observer.finish(run)
    assert run.gpu is not None and not run.gpu.available
    assert run.gpu.unavailable_reason == "Driver Not Loaded"


def test_observer_follows_cuda_visible_devices_and_ranks() -> None:
    clock = FakeClock()
    environ = {"CUDA_VISIBLE_DEVICES": "5", "RANK": "5", "LOCAL_RANK": "5"}
    observer = GpuSamplerObserver(lib=scenario_library("eight_gpus", clock), clock=clock, environ=environ, pid=5005)
    run = Run(command="run")
    observer.start(run)
    observer.finish(run)
    assert run.gpu is not None
    assert [(t.index, t.cuda_index) for t in run.gpu.devices] == [(5, 0)]
    assert run.gpu.devices[0].processes[0].role == "main"
    assert run.gpu.devices[0].summary.memory_used_max_bytes == 53 * GIB


# Without --expect-device the job is still judged for the NVIDIA GPU that NVML sees, although this CPU-only torch
# reaches no accelerator: a user who forgot the flag must get the same root cause.
@pytest.mark.parametrize("expect", [["--expect-device", "cuda"], []], ids=["expect-cuda", "default-device"])
def test_gputriage_run_report_carries_the_gpu_evidence(tmp_path: Path, expect: list[str]) -> None:
    # The real CLI on a tiny job, with the fake scenario's job renumbered to the job's own PID.
    env = dict(os.environ, GPUTRIAGE_FAKE_NVML="idle_memory_held", GPUTRIAGE_FAKE_JOB_PID="self")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "gputriage", "run", *expect, "--out", str(out)]
    done = subprocess.run(
        [*cmd, str(SCRIPTS / "waits_on_cpu.py")],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("done ")
    doc = json.loads((out / "report.json").read_text())
    gpu = doc["gpu"]
    assert gpu["available"] and gpu["source"] == "fake:idle_memory_held"
    (dev,) = gpu["devices"]
    (proc,) = dev["processes"]
    assert proc["is_job"] and proc["role"] == "main" and gpu["job_pids"] == [proc["pid"]]
    assert dev["summary"]["util_zero_pct_of_samples"] == 100.0
    assert dev["verdict"].startswith("idle while python train.py --epochs 90")
    # Rung 1 explains the idle GPU (a CPU-only torch next to an A100): it is the root cause, naming the GPU, and
    # low-gpu-utilization stays silent; the GPU's own state is still reported.
    assert doc["verdict"]["root_cause"] == "cpu-only-build"
    assert doc["findings"][0]["evidence"]["gpu"] == "NVIDIA A100-SXM4-80GB"
    # ... and it cites NVML's numbers: the GPU sat at 0% while the job ran on the CPU.
    assert doc["findings"][0]["evidence"]["nvml_gpu_util_zero_pct_of_samples"] == 100.0
    found = [f["code"] for f in doc["findings"]]
    assert "low-gpu-utilization" not in found
    assert "gpu-memory-nearly-full" in found
