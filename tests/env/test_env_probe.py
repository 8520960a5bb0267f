"""The torch probe: in a child interpreter (a broken torch cannot take gputriage down) and in-process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from env_fixtures import cuda_torch, diagnose_env, probe_fake

from gputriage.collectors.env_probe import probe_environment, probe_torch
from gputriage.diagnosis import diagnose
from gputriage.hardware.fake import FakeDevice, FakeNvml
from gputriage.hardware.fake_scenarios import scenario_library
from gputriage.record import Run


def test_child_and_in_process_probes_agree() -> None:
    import torch

    child = probe_torch(in_process=False)
    here = probe_torch(in_process=True)

    assert (child.probe_mode, here.probe_mode) == ("subprocess", "in-process")
    assert child.version == here.version == torch.__version__
    assert child.cuda_version == here.cuda_version == torch.version.cuda
    assert child.is_available == here.is_available == torch.cuda.is_available()
    assert child.is_cpu_build == here.is_cpu_build


def test_a_torch_that_kills_the_interpreter_is_reported_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "torch"
    broken.mkdir()
    (broken / "__init__.py").write_text("import os\nos.abort()  # as a segfault in a CUDA library would\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))

    facts = probe_torch(in_process=False)

    assert facts.installed is False
    assert facts.import_error is not None and "killed the interpreter" in facts.import_error


def test_a_hanging_cuda_init_is_reported_after_the_time_limit() -> None:
    facts = probe_torch(in_process=False, timeout_s=0.01)

    assert facts.init_warning is not None and "did not finish within" in facts.init_warning


def test_the_whole_probe_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_args: object, **_kw: object) -> None:
        raise RuntimeError("sysfs exploded")

    monkeypatch.setattr("gputriage.collectors.env_probe.probe_host", boom)
    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch") or __import__("torch"))

    env = probe_environment(nvml_lib=scenario_library("healthy_a100"))

    assert any("could not probe the host: RuntimeError: sysfs exploded" in u for u in env.unknown)
    assert env.driver.devices[0].name == "NVIDIA A100-SXM4-80GB"
    assert env.torch.probe_mode == "in-process"  # torch was already imported
    assert diagnose(Run(command="env", environment=env)).findings  # still diagnosed


def test_torchs_own_capability_warning_marks_the_nvml_device(tmp_path: Path) -> None:
    blackwell = FakeDevice(
        name="NVIDIA GeForce RTX 5090", uuid="GPU-5090", memory_total_bytes=32 * 1024**3, compute_capability=(12, 0)
    )
    warning = (
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.\n"
        "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90."
    )
    torch = cuda_torch("2.6.0+cu126", "12.6", init_warning=warning)
    env = probe_fake(
        tmp_path, FakeNvml([blackwell], driver_version="570.124.04", cuda_driver_version=12080), torch, gpus=1
    )

    top = diagnose_env(env).findings[0]

    assert len(env.driver.devices) == 1 and env.driver.devices[0].unsupported_by_torch is True
    assert (top.code, top.evidence["compute_capability"]) == ("arch-not-supported", "12.0")
    assert "cu128" in top.fix
