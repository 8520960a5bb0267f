"""`gputriage env --from` on what a ninth trial of 30 fresh reports found misread: an Ultralytics banner with no
device after it, torch's own CUDA_LAUNCH_BLOCKING hint, error 46 without an exclusive compute mode, a working XPU
set-up, another package's version in a REPL session, a build tag spaced out in prose, conda's `_pytorch_select`
selector, an old WSL 2 kernel, ROCm's "invalid device function", and a torch version that never existed. Each text
is our own, in the shape of what people paste."""

from __future__ import annotations

from gputriage.collectors.env_text import parse_environment_text
from gputriage.commands.env import diagnose_text


def _top(text: str) -> tuple[str, str, str]:
    diagnosis = diagnose_text(text)
    found = [f for f in diagnosis.findings if f.severity.value != "info"]
    return diagnosis.verdict.status, found[0].code if found else "", found[0].fix if found else ""


def test_an_ultralytics_banner_with_no_device_still_names_a_cpu_build() -> None:
    """comic-translate#17: select_device raised before naming a device, so the banner ends at the torch build."""
    text = (
        "Invalid CUDA 'device=0' requested.\n"
        "Ultralytics YOLOv8.1.3 Python-3.10.11 torch-2.1.0+cpu\n"
        "torch.cuda.is_available(): False\ntorch.cuda.device_count(): 0\n"
    )
    assert _top(text)[:2] == ("idle", "cpu-only-build")


def test_torchs_own_hint_sets_no_variable() -> None:
    """ComfyUI-Nvidia-Docker#61: "For debugging consider passing CUDA_LAUNCH_BLOCKING=1" was shown as set."""
    text = (
        "torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    )
    assert "CUDA_LAUNCH_BLOCKING" not in parse_environment_text(text).env_vars
    assert parse_environment_text("export CUDA_LAUNCH_BLOCKING=1\n").env_vars["CUDA_LAUNCH_BLOCKING"] == "1"


def test_error_46_without_an_exclusive_mode_names_every_cause() -> None:
    """stable-diffusion-webui#2986: a badly installed driver on Windows 10 was told "Exclusive-Process mode"."""
    text = "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable\nWindows 10, RTX A5000\n"
    finding = diagnose_text(text).findings[0]
    assert finding.code == "cuda-init-failed"
    assert "driver is broken or half-installed" in finding.title
    assert "reinstall the NVIDIA driver" in finding.fix and "nvidia-smi -c DEFAULT" not in finding.fix
    exclusive = (
        text
        + "|   0  NVIDIA RTX A5000   Off | 00000000:01:00.0 Off |   Off |  30%  40C  P8  20W / 230W |"
        + "  1MiB / 24564MiB |  0%  E. Process |\n"
    )
    assert "Exclusive-Process" in diagnose_text(exclusive).findings[0].title


def test_a_working_xpu_setup_is_not_a_machine_without_a_gpu() -> None:
    """comfyui-docker#11: `pytorch version: 2.9.1+xpu` and `Device: xpu:0 Intel(R) Arc(TM) A770 Graphics` was
    "no NVIDIA GPU: install the XPU build"."""
    text = (
        "Total VRAM 15474 MB, total RAM 32034 MB\npytorch version: 2.9.1+xpu\n"
        "Device: xpu:0 Intel(R) Arc(TM) A770 Graphics\n"
    )
    env = parse_environment_text(text)
    assert env.torch.other_accelerators == {"xpu": True}
    status, code, _ = _top(text)
    assert (status, code) == ("healthy", "")


def test_an_ipex_error_without_xpu_support_is_a_build_without_it() -> None:
    text = "RuntimeError: PyTorch is not linked with support for xpu devices\nIntel Arc A380\n"
    _, code, fix = _top(text)
    assert code == "cpu-only-build" and "whl/xpu" in fix


def test_another_packages_version_in_a_session_is_not_torchs() -> None:
    """pytorch#28195: two sessions, each printing torchvision's version after torch's; 0.4.0 became torch's, and the
    CUDA of the first session was judged with the torch of the second."""
    text = (
        ">>> import torch\n>>> print(torch.__version__)\n1.0.0\n>>> print(torchvision.__version__)\n0.2.1\n"
        ">>> torch.cuda.is_available()\nTrue\n>>> print(torch.version.cuda)\n9.0.176\n>>> exit()\n"
        "after the update:\n>>> print(torch.__version__)\n1.2.0\n>>> print(torchvision.__version__)\n0.4.0\n"
        ">>> torch.cuda.is_available()\nFalse\n>>> print(torch.version.cuda)\n10.0.130\n"
    )
    t = parse_environment_text(text).torch
    assert (t.version, t.cuda_version, t.available_elsewhere) == ("1.2.0", "10.0.130", "1.0.0")


def test_a_spaced_build_tag_and_a_gpu_in_prose_are_judged_together() -> None:
    """ComfyUI#9929: "PyTorch 2.8.0 + cu129" on a GTX 1070: 2.8's CUDA 12.8/12.9 builds dropped Pascal."""
    text = "**Setup:** i7-8750H, GTX 1070, 16 GB RAM.\n**Versions:** PyTorch 2.8.0 + cu129\nkernel error\n"
    _, code, fix = _top(text)
    assert code == "arch-not-supported" and "whl/cu126" in fix


def test_condas_pytorch_select_cpu_is_a_cpu_build() -> None:
    """pytorch-lightning#899: `_pytorch_select 0.1 cpu_0` in `conda list` was refused as holding no fact."""
    text = (
        "You requested GPUs: [0]\nBut your machine only has: []\n"
        "# Name                    Version                   Build  Channel\n"
        "_pytorch_select           0.1                       cpu_0\n"
    )
    _, code, fix = _top(text)
    assert code == "cpu-only-build"
    assert "cpuonly" not in fix  # no cpuonly package was shown: `conda remove cpuonly` would fail


def test_an_old_wsl2_kernel_is_named_and_updated() -> None:
    """vllm#6184: WSL 2 with kernel 5.10.16.3 was told to switch to WSL 2 (`wsl --set-version`)."""
    text = (
        'RuntimeError: Found no NVIDIA driver on your system.\n"Linux version 5.10.16.3-microsoft-standard-WSL2 '
        '(oe-user@oe-host)"\n'
    )
    assert parse_environment_text(text).host.wsl_kernel == "5.10.16.3"
    fix = _top(text)[2]
    assert "wsl --update" in fix and "--set-version" not in fix
    newer = text.replace("5.10.16.3", "5.15.153.1")
    assert "--set-version" in _top(newer)[2] or "wsl --update" in _top(newer)[2]
    assert "older than" not in diagnose_text(newer).findings[0].title


def test_rocms_invalid_device_function_is_a_missing_gfx_target() -> None:
    """pytorch#164346: "HIP error: invalid device function" on a ROCm 7.0 build asked which NVIDIA GPU it was."""
    text = "HIP error: invalid device function\n[pip3] torch==2.10.0.dev20250929+rocm7.0\n"
    _, code, fix = _top(text)
    assert code == "arch-not-supported" and "HSA_OVERRIDE_GFX_VERSION" in fix


def test_a_torch_version_that_never_existed_is_not_read_from_prose() -> None:
    """textgen#347: "something required pytorch 0.13 and something required pytorch 2.0" (torchaudio's 0.13)."""
    text = "torch.cuda.is_available() is False\nsomething required pytorch 0.13 and something required pytorch 2.0\n"
    assert parse_environment_text(text).torch.version != "0.13"
    assert parse_environment_text("with pytorch 1.13 it fails\n").torch.version == "1.13"


def test_an_older_cuda_build_that_works_beside_a_newer_one_that_does_not_is_the_driver() -> None:
    """pytorch#28195: torch 1.0 with CUDA 9.0 answers True, torch 1.2 with CUDA 10.0 False, on one machine ("my Nvidia
    version is too old"): the driver is older than CUDA 10.0 needs. Within one major version from CUDA 11 on, minor
    version compatibility runs the newer build, so that pair says nothing of the driver."""
    text = (
        ">>> import torch\n>>> print(torch.__version__)\n{old_torch}\n>>> torch.cuda.is_available()\nTrue\n"
        ">>> print(torch.version.cuda)\n{old}\n>>> exit()\nafter the update:\n>>> import torch\n"
        ">>> print(torch.__version__)\n{new_torch}\n>>> torch.cuda.is_available()\nFalse\n"
        ">>> print(torch.version.cuda)\n{new}\n"
    )
    finding = diagnose_text(text.format(old_torch="1.0.0", old="9.0.176", new_torch="1.2.0", new="10.0.130")).findings[
        0
    ]
    assert finding.code == "driver-too-old" and "CUDA 10.0 (it needs >= 410.48)" in finding.title
    assert "torch 1.0.0 (CUDA 9.0)" in finding.fix
    same_major = diagnose_text(text.format(old_torch="2.1.0", old="12.1", new_torch="2.4.0", new="12.4"))
    assert all(f.code != "driver-too-old" for f in same_major.findings)
