"""The rung-1 rules as pure functions of the record: no torch, no GPU, no I/O."""

from __future__ import annotations

from env_fixtures import codes, cuda_torch, diagnose_env

from gputriage.findings import Severity
from gputriage.record import Run, run_from_dict, run_to_dict
from gputriage.record.environment import DriverFacts, Environment, GpuDevice, HostFacts, TorchFacts


def _no_gpu_mac() -> Environment:
    return Environment(
        torch=TorchFacts(installed=True, version="2.13.0", is_cpu_build=True, other_accelerators={"mps": True}),
        driver=DriverFacts(nvml_loaded=False, nvml_error="NVML Shared Library Not Found"),
        host=HostFacts(os_name="darwin", dev_nodes=[], pci_nvidia_devices=None),
    )


def test_the_first_available_accelerator_is_the_default_device() -> None:
    diag = diagnose_env(_no_gpu_mac())

    # the job runs on mps: nothing NVIDIA matters, and no macOS build has CUDA, so "built without CUDA" says nothing
    assert codes(diag) == ["no-gpu-visible"]
    assert {f.severity for f in diag.findings} == {Severity.INFO}
    assert "meant to run on mps" in diag.findings[0].title
    assert "torch.device('mps')" in diag.findings[0].fix


def test_asking_for_cuda_on_that_mac_makes_it_critical() -> None:
    diag = diagnose_env(_no_gpu_mac(), expect_device="cuda")

    assert diag.verdict.root_cause == "no-gpu-visible"
    assert diag.findings[0].severity is Severity.CRITICAL


def test_an_empty_text_record_claims_nothing() -> None:
    assert diagnose_env(Environment(source="text")).findings == []


def test_torch_missing_is_critical_even_for_meta() -> None:
    env = Environment(torch=TorchFacts(installed=False, import_error="No module named 'torch'"))

    diag = diagnose_env(env, expect_device="meta")

    assert diag.findings[0].code == "torch-not-installed"
    assert diag.findings[0].severity is Severity.CRITICAL


def test_insufficient_driver_error_without_versions_is_still_driver_too_old() -> None:
    torch = cuda_torch("2.6.0+cu124", "12.4", is_available=False, init_error_code=35)
    torch.init_warning = "CUDA initialization: CUDA driver version is insufficient for CUDA runtime version"
    env = Environment(source="text", torch=torch)

    diag = diagnose_env(env)

    assert codes(diag) == ["driver-too-old"]  # not also cuda-init-failed: one cause, one finding
    assert diag.findings[0].evidence["cuda_error"] == 35


def test_probed_arch_list_decides_arch_support() -> None:
    env = Environment(
        torch=cuda_torch(
            "2.6.0+cu126", "12.6", arch_list=["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
        ),
        driver=DriverFacts(
            nvml_loaded=True,
            driver_version="570.124.04",
            cuda_driver_version="12.8",
            devices=[GpuDevice(0, "NVIDIA GeForce RTX 5090", compute_capability="12.0", source="nvml")],
        ),
        host=HostFacts(dev_nodes=["/dev/nvidia0", "/dev/nvidiactl"], pci_nvidia_devices=1),
    )

    top = diagnose_env(env).findings[0]

    assert top.code == "arch-not-supported"
    assert top.evidence["compute_capability"] == "12.0"
    # 570.124 runs CUDA 12.8; the newest build with sm_120 kernels that it runs: 2.9 + CUDA 12.8.
    assert top.fix.splitlines()[:2] == [
        "python -m pip uninstall -y torch",  # the wrong build goes first: pip would keep it
        "python -m pip install torch==2.9.0 --index-url https://download.pytorch.org/whl/cu128",
    ]


def test_an_sm_86_card_runs_sm_80_cubins() -> None:
    env = Environment(
        torch=cuda_torch("2.5.1+cu121", "12.1", arch_list=["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_90"]),
        driver=DriverFacts(
            nvml_loaded=True,
            driver_version="550.54.15",
            cuda_driver_version="12.4",
            devices=[GpuDevice(0, "NVIDIA RTX A6000", compute_capability="8.6", source="nvml")],
        ),
        host=HostFacts(dev_nodes=["/dev/nvidia0"], pci_nvidia_devices=1),
    )

    assert diagnose_env(env).findings == []


def test_the_environment_survives_a_json_round_trip() -> None:
    env = _no_gpu_mac()
    env.driver.devices.append(GpuDevice(0, "GPU 0", error="GPU is lost", mig_uuids=["MIG-1"]))
    run = Run(command="env", expect_device="cuda", environment=env)

    again = run_from_dict(run_to_dict(run))

    assert again.environment == env
    assert codes(diagnose_env(again.environment, "cuda")) == codes(diagnose_env(env, "cuda"))
    assert again.self_check() == []
