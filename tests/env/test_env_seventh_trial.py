"""`gputriage env --from` on what a seventh trial of 30 fresh reports found misread (stop 41): a GPU named in a
markdown list or a title that the build is too old for, a pip index that never existed, a driver whose module a
reboot did not update, "no device" under WSL 2, Intel's XPU messages, an x86_64 Python on an Apple silicon Mac, and
"no kernel image" raised in another package's code. Each text is our own, in the shape of what people paste."""

from __future__ import annotations

import pytest

from gputriage.collectors.env_text import parse_environment_text
from gputriage.commands.env import diagnose_text


def test_a_gpu_named_in_a_markdown_list_that_the_release_predates_is_arch_not_supported() -> None:
    """pytorch#160804: "**GPU**: NVIDIA GeForce RTX 5090" beside 2.2.0+cu121, whose arch list is not in the table
    (was: inconclusive, "paste collect_env")."""
    text = (
        "### Environment\n- **PyTorch Version**: 2.2.0+cu121\n- **GPU**: NVIDIA GeForce RTX 5090 (32GB GDDR7)\n"
        "- **CUDA Version**: 12.8 (Driver 570.181)\n- **OS**: Ubuntu (Linux)\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "arch-not-supported"
    assert "sm_120" in top.title and "2.2.0+cu121" in top.title
    assert "--index-url https://download.pytorch.org/whl/cu128" in top.fix


def test_a_gpu_named_in_a_title_that_the_builds_arch_list_lacks_is_arch_not_supported() -> None:
    """production-stack#528: an RTX 5090 and the image's 2.7.0+cu126, whose published list stops at sm_90."""
    text = "Cannot run on RTX 5090\nthe image has torch 2.7.0+cu126\n"
    top = diagnose_text(text).findings[0]
    assert (top.code, top.evidence["build_arch_list"]) == (
        "arch-not-supported",
        "sm_50 sm_60 sm_61 sm_70 sm_75 sm_80 sm_86 sm_90",
    )


@pytest.mark.parametrize("text", ["torch 2.5.1+cu124 on an RTX 4090\n", "torch 2.1.0+cu121 on an H100\n"])
def test_a_named_gpu_that_the_build_has_kernels_for_is_not_judged_by_name(text: str) -> None:
    assert all(f.code != "arch-not-supported" for f in diagnose_text(text).findings)


def test_an_index_that_was_never_published_leaves_pypis_cpu_wheel_on_windows() -> None:
    """pytorch#90845: `--extra-index-url .../whl/cu114` (no release was built for CUDA 11.4): pip took PyPI's torch,
    a CPU build on Windows (was: "CUDA 11.4 inferred from the install command's index", inconclusive)."""
    text = (
        "C:\\Users\\me> pip3 install torch torchvision torchaudio --extra-index-url https://download.pytorch.org/whl/cu114\n"
        "torch.cuda.is_available() returns False\n"
    )
    env = parse_environment_text(text)
    assert env.torch.cuda_version is None and "no cu114 index" in (env.torch.cpu_build_evidence or "")
    assert diagnose_text(text).findings[0].code == "cpu-only-build"


def test_a_published_index_is_still_the_builds_cuda() -> None:
    text = "pip3 install torch --index-url https://download.pytorch.org/whl/cu118\n"
    assert parse_environment_text(text).torch.cuda_version == "11.8"


_MISMATCH = (
    "$ nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\n{said}\n"
    "$ cat /proc/driver/nvidia/version\n"
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  520.56.06  Thu Oct  6 21:38:55 UTC 2022\n"
    "$ dpkg -l nvidia-smi\n"
    "ii  nvidia-smi     525.85.12-1  amd64        NVIDIA System Management Interface\n"
)


def test_a_mismatch_a_reboot_did_not_fix_installs_the_module_of_the_user_space_release() -> None:
    """machine-shop-maintenance#70: the module loaded after a reboot is 520, dpkg's user space 525 (was: `sudo
    reboot`, which the reporter had just done)."""
    text = _MISMATCH.format(said="Tried rebooting the system, but still doesn't work.")
    top = diagnose_text(text).findings[0]
    assert top.code == "driver-library-mismatch"
    assert top.evidence["kernel_module_version"] == "520.56.06" and top.evidence["library_version"] == "525.85.12"
    assert "nvidia-dkms-525" in top.fix and not top.fix.startswith("sudo reboot")


def test_a_mismatch_with_no_reboot_said_is_still_a_reboot() -> None:
    top = diagnose_text(_MISMATCH.format(said="It started after the update.")).findings[0]
    assert top.code == "driver-library-mismatch" and top.fix.startswith("sudo reboot")


@pytest.mark.parametrize(
    "said",
    [
        "Tried rebooting, still broken",
        "even after a reboot it fails",
        "rebooting didn't help",
        "I rebooted, same error",
    ],
)
def test_a_reboot_tried_is_read(said: str) -> None:
    assert parse_environment_text(f"Failed to initialize NVML: Driver/library version mismatch\n{said}\n").host.rebooted


def test_no_device_under_wsl_gets_wsls_path_to_the_gpu() -> None:
    """genesis-world#114: cuInit's NO_DEVICE "run under wsl2" (was: a Linux thread's CUDA_VISIBLE_DEVICES check)."""
    text = (
        "I have the same issue with my cuda 12.1 run under wsl2\n"
        "CUDA Error CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected while calling init (cuInit)\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "cuda-init-failed" and "WSL 2" in top.title
    assert "ldconfig -p | grep 'libcuda.so'" in top.fix and "source" not in top.evidence


def test_torch_without_xpu_on_an_intel_arc_gets_the_xpu_build() -> None:
    """sdnext#4357 (was: exit 2, no facts)."""
    text = "AssertionError: Torch not compiled with XPU enabled\nGPU : Intel Arc A750 8GB\n"
    findings = diagnose_text(text).findings
    assert [f.code for f in findings] == ["cpu-only-build"]
    assert "Intel Arc A750" in findings[0].title and "whl/xpu" in findings[0].fix


def test_the_xpu_build_with_no_device_gets_intels_driver() -> None:
    """sdnext#3201: "XPU Device count is zero!" on an arc770 (was: exit 2)."""
    text = (
        "I have an arc770\n[W Device.cpp:127] Warning: XPU Device count is zero! (function initGlobalDevicePoolState)\n"
    )
    findings = diagnose_text(text).findings
    assert [f.code for f in findings] == ["driver-not-loaded"]
    assert "Intel Arc770" in findings[0].title and "clinfo -l" in findings[0].fix


def test_an_x86_64_python_on_an_apple_silicon_mac_is_rosetta() -> None:
    """pytorch#146236 (was: "use MPS", which the reporter was doing)."""
    text = (
        "OS: macOS 15.3 (x86_64)\nPython platform: macOS-10.16-x86_64-i386-64bit\nIs CUDA available: False\n"
        "CPU:\nApple M2 Pro\n"
    )
    assert parse_environment_text(text).host.rosetta is True
    top = diagnose_text(text).findings[0]
    assert "Rosetta" in top.fix and "platform.machine()" in top.fix


def test_an_arm64_python_on_an_apple_silicon_mac_is_not_rosetta() -> None:
    text = "OS: macOS 15.3 (arm64)\nPython platform: macOS-15.3-arm64-arm-64bit\nCPU:\nApple M2 Pro\n"
    assert parse_environment_text(text).host.rosetta is None


def test_no_kernel_image_raised_in_another_packages_code_names_that_package() -> None:
    """BMInf#29: the traceback ends in site-packages/cpm_kernels, the title quoted the error first (was: reinstall
    torch)."""
    text = (
        "CUDA Error: no kernel image is available for execution on the device\n"
        "Failed to run with P100 GPU which works fine with other pytorch cuda code\n"
        "/opt/conda/lib/python3.8/site-packages/cpm_kernels/library/cuda.py in checkCUStatus(error)\n"
        '--> 216         raise RuntimeError("CUDA Error: %s" % cuGetErrorString(error))\n'
        "RuntimeError: CUDA Error: no kernel image is available for execution on the device\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "arch-not-supported" and top.evidence["raised_in"] == "cpm_kernels"
    assert "in cpm_kernels" in top.title
    assert top.fix.splitlines()[0].startswith('python -c "import torch; print(torch.cuda.get_arch_list())"')


def test_no_kernel_image_under_torchs_own_frames_is_not_blamed_on_a_package() -> None:
    text = (
        'File "/usr/lib/python3/site-packages/transformers/models/llama/modeling_llama.py", line 200, in forward\n'
        'File "/usr/lib/python3/site-packages/torch/nn/functional.py", line 2100, in silu\n'
        "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    )
    assert parse_environment_text(text).errors[0].package is None


def test_an_amd_gpu_that_works_for_another_user_is_the_device_files_groups() -> None:
    """ROCm/legacy-rocm-build#3072: user A gets True, user B False on one machine (was: install the ROCm build)."""
    text = (
        '[Issue]: python -c "import torch;print(torch.cuda.is_available())" returns False\n'
        "  Marketing Name:          Radeon RX 7900 XTX\n"
        "I have 2 user accounts(A and B) in my system(Ubuntu 22.04.4). A runs this successfully and returns True, "
        "but B doesn't.\n"
    )
    assert parse_environment_text(text).host.other_user_works is True
    top = diagnose_text(text).findings[0]
    assert "usermod -a -G render,video" in top.fix and "rocm7.2" not in top.fix


def test_two_environments_compared_are_not_two_users() -> None:
    text = "torch 2.5.1+cu124: torch.cuda.is_available() works in conda env A, but env B doesn't\n"
    assert parse_environment_text(text).host.other_user_works is None


def test_error_804_outside_a_container_is_a_driver_updated_without_a_reboot() -> None:
    """pytorch#40671: 804 'after a recent ubuntu update', in a conda env on bare Ubuntu (was: the container's
    compat libraries, with no reboot offered)."""
    text = (
        "Trying to run training with pytorch after recent ubuntu update (it used to work before):\n"
        "RuntimeError: cuda runtime error (804) : forward compatibility was attempted on non supported HW\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "cuda-init-failed" and "without a reboot" in top.title
    assert "sudo reboot" in top.fix


def test_error_804_in_a_container_is_still_the_images_cuda() -> None:
    text = (
        "$ ls /.dockerenv\n/.dockerenv\n"
        "RuntimeError: cuda runtime error (804) : forward compatibility was attempted on non supported HW\n"
    )
    top = diagnose_text(text).findings[0]
    assert "without a reboot" not in top.title


def test_a_driver_version_named_after_a_link_is_read() -> None:
    """pytorch#90845: "the latest NVIDIA standard driver](https://...), which is version `472.84`": with it, the fix
    is a build that driver runs (cu118 through CUDA 11.x minor version compatibility), not cu126."""
    text = (
        "So I'm stuck with [the latest NVIDIA _**standard**_ driver](https://www.nvidia.com/Download/Find.aspx?lang=en-us),"
        " which is version `472.84`.\n"
        "C:\\Users\\me> pip3 install torch torchvision torchaudio --extra-index-url https://download.pytorch.org/whl/cu114\n"
    )
    assert parse_environment_text(text).driver.driver_version == "472.84"
    assert "whl/cu118" in diagnose_text(text).findings[0].fix
