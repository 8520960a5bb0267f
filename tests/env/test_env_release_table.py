"""The release table's newest facts, as the fixes use them: torch 2.11-2.14's PyPI wheel is a CUDA 13.0 build (a
driver before 580 cannot run it), 2.14's CUDA variants and arch lists, and the companions pinned with it."""

from __future__ import annotations

from gputriage.commands.env import diagnose_text
from gputriage.data.cuda_tables import TORCH_RELEASES, arch_list_for, companions_of


def test_a_plain_pip_install_of_a_recent_torch_on_linux_is_pypis_cuda_13_build() -> None:
    """`pip install torch==2.12.0` on Linux installs 2.12.0+cu130 from PyPI: with a 550 driver (CUDA 12.4) it cannot
    start; the fix keeps the release and takes the build that driver runs (was: inconclusive, CUDA unknown)."""
    text = (
        "pip install torch==2.12.0\nSuccessfully installed torch-2.12.0\n"
        ">>> import torch\n>>> torch.cuda.is_available()\nFalse\n"
        "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |\n"
        "OS: Ubuntu 22.04.4 LTS (x86_64)\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "driver-too-old"
    assert top.evidence["torch_cuda"] == "13.0"
    assert top.evidence["torch_cuda_from"] == "the default PyPI wheel of torch 2.12.0 for Linux"
    assert "torch==2.12.0 --index-url https://download.pytorch.org/whl/cu126" in top.fix


def test_torch_2_14_ships_cuda_12_6_13_0_and_13_2_with_2_13s_architectures() -> None:
    assert TORCH_RELEASES["2.14"].cuda_variants == ("12.6", "13.0", "13.2")
    assert TORCH_RELEASES["2.14"].pypi_cuda == "13.0"
    assert arch_list_for("2.14.0+cu130", "13.0") == arch_list_for("2.13.0+cu130", "13.0")
    assert "sm_120" in (arch_list_for("2.14.0", "13.2") or ())
    assert "sm_120" not in (arch_list_for("2.14.0", "12.6") or ())
    assert companions_of("2.14.0+cu130") == ("0.29.0", "2.11.0")


def test_a_torch_2_14_build_without_blackwell_kernels_gets_2_14s_build_that_has_them() -> None:
    text = (
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.\n"
        "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n"
        "torch 2.14.0+cu126\n"
        "| NVIDIA-SMI 590.44.01              Driver Version: 590.44.01      CUDA Version: 13.1     |\n"
        "torchvision 0.29.0+cu126\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "arch-not-supported"
    assert "torch==2.14.0 torchvision==0.29.0 --index-url https://download.pytorch.org/whl/cu130" in top.fix
