"""Rung 1 through NVML: the fake's scenarios named after real failures, and the same checks on a real GPU (`gpu`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from env_fixtures import codes, cuda_torch, diagnose_env, finding, probe_fake

from gputriage.collectors.env_probe import probe_driver, probe_environment
from gputriage.findings import Severity
from gputriage.hardware.fake_scenarios import scenario_library
from gputriage.rules.env_facts import gpu_presence


def test_old_driver_410_is_too_old_for_the_cuda_10_1_wheel(tmp_path: Path) -> None:
    # pytorch#31243: torch 1.3.0's wheel is built with CUDA 10.1, driver 410.48 only runs CUDA 10.0.
    env = probe_fake(tmp_path, scenario_library("old_driver_410"), cuda_torch("1.3.0", "10.1"), gpus=1)

    diag = diagnose_env(env)

    assert env.driver.driver_version == "410.48"
    assert env.driver.cuda_driver_version is None  # that libnvidia-ml predates nvmlSystemGetCudaDriverVersion
    assert diag.verdict.root_cause == "driver-too-old"
    top = diag.findings[0]
    assert top.severity is Severity.CRITICAL
    assert top.evidence["driver_version"] == "410.48"
    assert top.evidence["driver_cuda"] == "10.0"  # from the release-notes table, since NVML could not say
    assert top.evidence["min_driver_for_torch_cuda"] == "418.39"
    assert "torch==1.3.0+cu100" in top.fix  # the build that this driver runs


def test_a_cuda_12_wheel_on_driver_410_cannot_run_at_all(tmp_path: Path) -> None:
    env = probe_fake(tmp_path, scenario_library("old_driver_410"), cuda_torch("2.6.0+cu124", "12.4"), gpus=1)

    top = diagnose_env(env).findings[0]

    assert (top.code, top.severity) == ("driver-too-old", Severity.CRITICAL)
    assert top.evidence["min_driver_for_torch_cuda"] == "550.54.14"


def test_minor_version_compatibility_is_a_note_where_the_build_has_the_gpus_kernels(tmp_path: Path) -> None:
    # not_supported: driver 535.104.05 (CUDA 12.2) with a CUDA 12.4 build runs via minor version compatibility; torch
    # reaches the GPU and 2.6's cu124 build has its kernels, so only PTX JIT, which nothing here needs, wants more.
    env = probe_fake(tmp_path, scenario_library("not_supported"), cuda_torch("2.6.0+cu124", "12.4"), gpus=1)

    diag = diagnose_env(env)

    assert codes(diag) == ["driver-too-old"]
    assert diag.findings[0].severity is Severity.INFO
    assert diag.verdict.status == "healthy"
    assert "minor version compatibility" in diag.findings[0].title
    assert "nothing to change" in diag.findings[0].fix


def test_minor_version_compatibility_is_a_warning_where_the_kernels_need_ptx_jit(tmp_path: Path) -> None:
    # the same driver gap with a build whose arch list lacks the GPU's cubin: its kernels come from PTX, JIT-compiled
    # by a driver older than the PTX's CUDA, which fails
    torch_facts = cuda_torch("2.6.0+cu124", "12.4")
    torch_facts.arch_list = ["sm_50", "sm_60", "compute_60"]
    env = probe_fake(tmp_path, scenario_library("not_supported"), torch_facts, gpus=1)

    diag = diagnose_env(env)

    assert "driver-too-old" in codes(diag)
    finding = next(f for f in diag.findings if f.code == "driver-too-old")
    assert finding.severity is Severity.WARNING
    assert "PTX JIT kernels will fail" in finding.title


def test_driver_library_mismatch_says_reboot(tmp_path: Path) -> None:
    env = probe_fake(tmp_path, scenario_library("driver_library_mismatch"), cuda_torch(is_available=False), gpus=1)

    diag = diagnose_env(env)

    assert env.driver.nvml_loaded is False
    assert diag.verdict.root_cause == "driver-library-mismatch"
    assert diag.findings[0].evidence["nvml_error"] == "Driver/library version mismatch"
    assert "sudo reboot" in diag.findings[0].fix


def test_kernel_module_and_library_versions_that_differ_are_a_mismatch(tmp_path: Path) -> None:
    env = probe_fake(tmp_path, scenario_library("healthy_a100"), cuda_torch(), gpus=1, kernel_driver="535.104.05")

    top = diagnose_env(env).findings[0]

    assert top.code == "driver-library-mismatch"
    assert top.evidence == {"kernel_module_version": "535.104.05", "library_version": "550.54.15"}


def test_a_board_on_the_pci_bus_without_a_loaded_driver(tmp_path: Path) -> None:
    env = probe_fake(
        tmp_path, scenario_library("driver_not_loaded"), cuda_torch(is_available=False, device_count=0), pci_gpus=1
    )

    diag = diagnose_env(env)

    assert env.host.pci_nvidia_devices == 1  # the GPU, not its HDMI audio function
    assert diag.verdict.root_cause == "driver-not-loaded"
    assert diag.findings[0].evidence["nvml_error"] == "Driver Not Loaded"
    assert "sudo modprobe nvidia" in diag.findings[0].fix


def test_no_library_and_nothing_on_the_bus_is_no_gpu(tmp_path: Path) -> None:
    env = probe_fake(
        tmp_path, scenario_library("library_not_found"), cuda_torch(is_available=False, device_count=0), pci_gpus=0
    )

    meant_for_gpu, by_default = diagnose_env(env, expect_device="cuda"), diagnose_env(env)

    assert gpu_presence(env) == "none"
    assert meant_for_gpu.verdict.root_cause == "no-gpu-visible"
    assert "no NVIDIA driver is installed" in meant_for_gpu.findings[0].title
    # Without --expect-device the default is the first available accelerator; with none, the CPU (as `run` does).
    assert by_default.verdict.root_cause is None
    assert by_default.findings[0].code == "no-gpu-visible"
    assert by_default.findings[0].severity is Severity.INFO


def test_not_supported_metrics_leave_facts_empty_and_nothing_wrong(tmp_path: Path) -> None:
    # A GeForce answers NOT_SUPPORTED for MIG and PCI info: those facts are None, not a crash, not a finding.
    env = probe_fake(tmp_path, scenario_library("not_supported"), cuda_torch("2.1.0+cu121", "12.1"), gpus=1)

    diag = diagnose_env(env)

    device = env.driver.devices[0]
    assert (device.name, device.compute_capability) == ("NVIDIA GeForce RTX 3090", "8.6")
    assert device.mig_mode is None and device.pci_bus_id is None
    assert diag.findings == []
    assert diag.verdict.status == "healthy"


def test_a_lost_gpu_is_named_with_its_bus_id(tmp_path: Path) -> None:
    env = probe_fake(tmp_path, scenario_library("gpu_lost"), cuda_torch(device_count=1), gpus=2)

    diag = diagnose_env(env)

    assert [d.error for d in env.driver.devices] == [None, "GPU is lost"]
    lost = finding(diag, "cuda-init-failed")
    assert lost.severity is Severity.WARNING  # GPU 0 still works
    assert lost.evidence["lost_gpus"] == "1 (GPU 1)"
    assert "xid" in lost.fix.lower()


def test_mig_instances_are_read_and_checked_against_cuda_visible_devices(tmp_path: Path) -> None:
    lib = scenario_library("mig")
    uuids = ["MIG-4f3c1a2b-77d0-5e1f-9a8b-000000000000", "MIG-4f3c1a2b-77d0-5e1f-9a8b-000000000001"]

    good = probe_fake(tmp_path / "a", lib, cuda_torch(), gpus=1, environ={"CUDA_VISIBLE_DEVICES": uuids[1]})
    wrong = probe_fake(
        tmp_path / "b", scenario_library("mig"), cuda_torch(), gpus=1, environ={"CUDA_VISIBLE_DEVICES": "MIG-0000dead"}
    )

    assert good.driver.devices[0].mig_mode is True
    assert good.driver.devices[0].mig_uuids == uuids
    assert diagnose_env(good).findings == []
    top = diagnose_env(wrong).findings[0]
    assert top.code == "cuda-visible-devices"
    assert top.severity is Severity.CRITICAL
    assert top.evidence["gpus_cuda_will_see"] == 0


@pytest.mark.parametrize(
    ("value", "why"),
    [("", "empty"), ("-1", "-1 means no GPU"), ("3", "3 (no such GPU)"), ("GPU-ffff", "matches no GPU")],
)
def test_cuda_visible_devices_that_hide_every_gpu(tmp_path: Path, value: str, why: str) -> None:
    env = probe_fake(
        tmp_path, scenario_library("healthy_a100"), cuda_torch(), gpus=1, environ={"CUDA_VISIBLE_DEVICES": value}
    )

    top = diagnose_env(env).findings[0]

    assert top.code == "cuda-visible-devices"
    assert top.severity is Severity.CRITICAL
    assert why in top.title
    assert top.evidence["CUDA_VISIBLE_DEVICES"] == value


def test_cuda_visible_devices_with_a_real_uuid_prefix_is_fine(tmp_path: Path) -> None:
    env = probe_fake(
        tmp_path, scenario_library("healthy_a100"), cuda_torch(), gpus=1, environ={"CUDA_VISIBLE_DEVICES": "GPU-a100"}
    )

    assert diagnose_env(env).findings == []


def test_a_cpu_build_on_an_a100_is_the_root_cause_with_the_gpu_named(tmp_path: Path) -> None:
    env = probe_fake(tmp_path, scenario_library("healthy_a100"), cuda_torch("2.13.0+cpu", None), gpus=1)

    top = diagnose_env(env).findings[0]

    assert (top.code, top.severity) == ("cpu-only-build", Severity.CRITICAL)
    assert top.evidence["gpu"] == "NVIDIA A100-SXM4-80GB"
    assert top.evidence["driver_cuda"] == "12.4"
    # 2.13 ships cu126/cu129/cu130/cu132: the newest one a CUDA 12.4 driver runs is cu126.
    assert "python -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126" in top.fix
    assert "--extra-index-url" in top.fix  # says why not to use it


def test_the_gpu_is_not_judged_when_the_job_is_meant_for_meta(tmp_path: Path) -> None:
    env = probe_fake(tmp_path, scenario_library("no_gpu"), cuda_torch("2.13.0+cpu", None), pci_gpus=0)

    diag = diagnose_env(env, expect_device="meta")

    assert {f.severity for f in diag.findings} == {Severity.INFO}
    assert diag.verdict.root_cause is None
    assert diag.verdict.status == "healthy"


def test_a_container_started_without_gpus(tmp_path: Path) -> None:
    # A CUDA build in a docker container that has neither /dev/nvidia* nor libnvidia-ml: `docker run` without --gpus.
    env = probe_fake(
        tmp_path,
        scenario_library("library_not_found"),
        cuda_torch(is_available=False, device_count=0),
        docker=True,
        pci_gpus=2,
    )

    top = diagnose_env(env).findings[0]

    assert top.code == "container-without-gpu"
    assert top.evidence["container"] == "docker"
    assert "docker run --gpus all" in top.fix


# --- the same paths against the real library, on a machine with an NVIDIA GPU ---------------------------------------
@pytest.mark.gpu
def test_real_nvml_reads_every_device() -> None:
    facts = probe_driver()

    assert facts.nvml_loaded is True, facts.nvml_error
    assert facts.driver_version and facts.driver_version[0].isdigit()
    assert facts.cuda_driver_version and facts.cuda_driver_version[0].isdigit()
    assert facts.devices
    for device in facts.devices:
        assert device.error is None
        assert device.name and device.uuid and device.uuid.startswith("GPU-")
        assert device.memory_total_bytes and device.memory_total_bytes > 1024**3
        assert device.compute_capability and "." in device.compute_capability


@pytest.mark.gpu
def test_real_machine_with_a_gpu_has_no_nvidia_root_cause() -> None:
    env = probe_environment("cuda")
    diag = diagnose_env(env, expect_device="cuda")

    assert gpu_presence(env) == "present"
    assert "no-gpu-visible" not in codes(diag)
    assert "driver-not-loaded" not in codes(diag)
    assert "driver-library-mismatch" not in codes(diag)
    assert len([n for n in env.host.dev_nodes or [] if n[len("/dev/nvidia") :].isdigit()]) >= len(env.driver.devices)


@pytest.mark.gpu
def test_real_mig_devices_list_their_instances() -> None:
    facts = probe_driver()
    mig = [d for d in facts.devices if d.mig_mode]
    if not mig:
        pytest.skip("no GPU in MIG mode here")

    for device in mig:
        assert all(uuid.startswith("MIG-") for uuid in device.mig_uuids)


@pytest.mark.gpu
def test_real_cuda_visible_devices_naming_a_missing_gpu(tmp_path: Path) -> None:
    real = probe_driver()
    env = probe_environment("cuda", environ={"CUDA_VISIBLE_DEVICES": str(len(real.devices))}, in_process=True)

    top = diagnose_env(env, expect_device="cuda").findings[0]

    assert top.code == "cuda-visible-devices"
    assert top.evidence["gpus_cuda_will_see"] == 0
