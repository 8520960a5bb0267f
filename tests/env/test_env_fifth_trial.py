"""`gputriage env --from` on what a fifth trial of 30 fresh reports found misread (stop 39): a prose answer that
contradicts collect_env's, WSL 2's own path to the GPU, several GPUs named, torch 1.13's UUID count and bare prose
that names a GPU and a torch. Each text is our own, in the shape of what people paste."""

from __future__ import annotations

import pytest

from gputriage.collectors.env_text import parse_environment_text
from gputriage.commands.env import diagnose_text

_COLLECT_ENV_TRUE = (
    "PyTorch version: 2.0.1+cu117\nCUDA used to build PyTorch: 11.7\nOS: Microsoft Windows 11 Pro\n"
    "Is CUDA available: True\nGPU models and configuration: GPU 0: NVIDIA GeForce GTX 1050 Ti\n"
    "Nvidia driver version: 535.98\n[pip3] torch==2.0.1+cu117\n"
)


def test_a_prose_false_against_collect_envs_true_is_another_interpreter() -> None:
    """pytorch#51858: "print(torch.cuda.is_available()) return false" above a collect_env that says True (was:
    critical cuda-init-failed, "the evidence does not say why"; without the prose line: healthy)."""
    text = "import torch\n\nprint(torch.cuda.is_available()) return false\n\n" + _COLLECT_ENV_TRUE
    top = diagnose_text(text).findings[0]
    assert top.code == "cuda-init-failed"
    assert "another interpreter or environment" in top.title
    assert top.evidence["available_elsewhere"] == "2.0.1+cu117"
    assert "sys.executable" in top.fix
    assert diagnose_text(_COLLECT_ENV_TRUE).verdict.status == "healthy"


def test_prose_that_names_a_data_centre_gpu_and_a_torch_is_inconclusive_not_refused() -> None:
    """pytorch#102715: "an a100 machine ... torch is 1.13.1" (was: exit 2, no facts found)."""
    text = "Hi, I have an a100 machine with MIG.\n`torch.cuda.device_count()` shows only one gpu.\n\ntorch is 1.13.1\n"
    env = parse_environment_text(text)
    assert env.torch.version == "1.13.1"
    assert env.host.gpu_named == "a100"
    assert diagnose_text(text).verdict.status == "inconclusive"


def test_several_gpus_named_with_no_arch_list_are_each_a_suspect() -> None:
    """pytorch#31319: "a Tesla K80 and two Tesla K40c cards", no kernel image (was: the K80 blamed, the first named,
    and the check then sent the user to rebuild an extension)."""
    text = (
        "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
        "This occurs on a system where I have a Tesla K80 and two Tesla K40c cards. It seems to be only related to "
        "the K40c cards.\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "arch-not-supported"
    assert top.evidence["gpus_named"] == ["Tesla K80", "Tesla K40c"]
    assert "sm_37" in top.title and "sm_35" in top.title
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in top.fix and "get_device_capability(i)" in top.fix


def test_of_several_gpus_named_the_one_the_known_arch_list_lacks_is_named() -> None:
    text = (
        "torch 2.7.0+cu128\nRuntimeError: CUDA error: no kernel image is available for execution on the device\n"
        "The box has an RTX 3090 and a Tesla K80.\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "arch-not-supported"
    assert "Tesla K80" in top.title and "sm_37" in top.title
    assert top.evidence["gpus_with_kernels"] == ["RTX 3090"]
    assert "hides the Tesla K80" in top.fix


def test_wsl_driver_not_reached_gets_the_windows_path_never_a_linux_driver() -> None:
    """WSL#6772: nvidia-smi "couldn't communicate with the NVIDIA driver" inside WSL 2 (was: sudo modprobe nvidia,
    sudo ubuntu-drivers install, which breaks WSL's libcuda)."""
    text = (
        "Linux version 5.4.91-microsoft-standard-WSL2 (oe-user@oe-host)\nLatest Nvidia Win10 driver 465.89\n"
        "$ nvidia-smi\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
        "the latest NVIDIA driver is installed and running.\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "driver-not-loaded"
    assert "WSL" in top.title
    assert "modprobe" not in top.fix and "ubuntu-drivers" not in top.fix
    assert "wsl --update" in top.fix


def test_wsl_error_2_at_device_count_is_wsls_not_another_process() -> None:
    """WSL#10269: cudaGetDeviceCount "Error 2: out of memory" under WSL 2 (was: "another process holds the GPU's
    memory", and nvidia-smi's process query)."""
    text = (
        "Installed WSL 2, and used Ubuntu 20.04, I ran wsl --update\n"
        "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
        "functions before calling NumCudaDevices() that might have already set an error? Error 2: out of memory\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "cuda-init-failed"
    assert "WSL" in top.title and "another process" not in top.title
    assert top.fix.startswith("CUDA_VISIBLE_DEVICES=0 ")
    assert "--query-compute-apps" not in top.fix


def test_torch_113_with_a_mig_uuid_keeps_the_uuid_and_leaves_113() -> None:
    """pytorch#95784: torch 1.13 counts 0 devices under a MIG UUID, which is right (was: replace the UUID with an
    index or unset it, which picks the whole GPU or another slice)."""
    text = (
        "`torch.cuda.device_count()` returns `0`, when used on an A100 in MIG-Mode:\n"
        "CUDA_VISIBLE_DEVICES=MIG-feee0c61-26ec-5616-bb59-b6d777cc4f34 ipython\n"
        "In [7]: torch.cuda.device_count()\nOut[7]: 0\n"
        "PyTorch version: 1.13.1+cu117\nCUDA used to build PyTorch: 11.7\nNvidia driver version: 515.86.01\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "cuda-visible-devices"
    assert top.title.startswith("torch counts no GPU under CUDA_VISIBLE_DEVICES=")
    assert "keep CUDA_VISIBLE_DEVICES as it is" in top.fix
    assert "torch==2.0.1 --index-url https://download.pytorch.org/whl/cu117" in top.fix
    assert "unset CUDA_VISIBLE_DEVICES" not in top.fix


def test_a_plain_pypi_wheel_gets_the_pip_build_with_the_gpus_kernels_not_conda() -> None:
    """pytorch#53838: `pip install torch` gave 1.8.0 (CUDA 10.2, no sm_86) on an RTX 3090 (was: a conda command for a
    pip install); the thread's fix was the +cu111 wheel."""
    text = (
        "pip install torch\nCollecting torch\n  Using cached torch-1.8.0-cp38-cp38-manylinux1_x86_64.whl (735.5 MB)\n"
        "/home/u/anaconda3/envs/test/lib/python3.8/site-packages/torch/cuda/__init__.py:104: UserWarning:\n"
        "GeForce RTX 3090 with CUDA capability sm_86 is not compatible with the current PyTorch installation.\n"
        "The current PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70.\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "arch-not-supported"
    assert "python -m pip install torch==1.8.0+cu111 -f https://download.pytorch.org/whl/torch_stable.html" in top.fix
    assert "conda install" not in top.fix


def test_a_stale_pip_line_of_another_torch_does_not_make_the_running_conda_torch_pips() -> None:
    """pytorch#28321: collect_env runs conda's pytorch 1.3.0; a leftover `[pip3] torch==1.2.0` and its torchvision
    0.4.0 came first (was: "pip", and torchvision 0.4.0 paired with torch 1.3.0, a wheel that does not exist)."""
    text = (
        "PyTorch version: 1.3.0\nCUDA used to build PyTorch: 10.1.243\nNvidia driver version: 410.104\n"
        "[pip3] torch==1.2.0\n[pip3] torchvision==0.4.0\n"
        "[conda] pytorch                   1.3.0           py3.7_cuda10.1.243_cudnn7.6.3_0    pytorch\n"
        "[conda] torchvision               0.4.1                py37_cu101    pytorch\n"
    )
    env = parse_environment_text(text)
    assert env.torch.install_method == "conda"
    assert env.torch.companions["torchvision"] == "0.4.1"
    assert "torchvision==0.4.0" not in diagnose_text(text).findings[0].fix


def test_an_amd_gpu_on_windows_gets_directml_not_a_linux_rocm_build() -> None:
    """ComfyUI#2576: an RX470 on Windows, "Found no NVIDIA driver on your system" (was: "run on a machine that has an
    NVIDIA GPU"; the RX470 was not even read as AMD)."""
    text = (
        "Windows 10, AMD RX470 8GB.\n"
        "It works fine with CPU, but when I try to run the non-CPU version, it gives me "
        '"Found no NVIDIA driver on your system"\n'
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "no-gpu-visible"
    assert "torch-directml" in top.fix and "--index-url" not in top.fix


@pytest.mark.parametrize(
    ("line", "jetpack"),
    [
        ("dustynv/whisper:r36.4.tegra-aarch64-cu126-22.04-pytorch_2.9", "6.1"),
        ("Jetson Xavier NX, L4T R35.4.1", "5.1.2"),
        (
            "$ cat /etc/nv_tegra_release\n# R32 (release), REVISION: 7.4, GCID: 33514132, BOARD: t210ref (jetson nano)",
            "4.6",
        ),
    ],
)
def test_the_l4t_release_gives_the_jetpack_of_the_wheels(line: str, jetpack: str) -> None:
    """jetson-containers#1468: `r36.4` in the container's tag (was: the fix's folder left as `v<JetPack version>`)."""
    text = f"{line}\n>>> torch.__version__\n'2.9.0+cpu'\n>>> torch.cuda.is_available()\nFalse\n"
    assert parse_environment_text(text).host.jetpack_version == jetpack
    folder = f"/jp/v{jetpack.replace('.', '')}/pytorch/"
    assert folder in diagnose_text(text).findings[0].fix
