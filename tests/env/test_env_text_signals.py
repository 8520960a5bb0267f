"""`gputriage env --from` on the shapes of real reports that earlier rounds misread: prose answers in any case and
wording, set-up lists, Jetson boards, two sessions in one report, kernel-module messages, AMD GPUs, Macs, very old
GPUs and container runtimes other than docker. Each text is our own, in the spirit of what people paste."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from env_fixtures import run_env_json

from gputriage.cli import main


def _env_from(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> tuple[int, dict[str, Any]]:
    paste = tmp_path / "paste.txt"
    paste.write_text(text)
    return run_env_json(capsys, "--from", str(paste))


def _top(doc: dict[str, Any]) -> dict[str, Any]:
    code = doc["verdict"]["root_cause"]
    return next(f for f in doc["findings"] if f["code"] == code)


@pytest.mark.parametrize(
    "text",
    [
        "On my laptop torch.cuda.is_available() returns false, no idea why\n",
        "the check is_available() returns false every time\n",
        "print(torch.cuda.is_available()) gives False on this box\n",
        "torch.cuda.is_available() -> False\n",
        "cuda.is_available() prints False\n",
        "torch.cuda.is_available() is False after the upgrade\n",
        "I successfully install torch 2.1 with pip, but cuda.is_available() returns false\n",
    ],
)
def test_prose_answers_are_read_whatever_their_case_and_wording(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str
) -> None:
    code, doc = _env_from(capsys, tmp_path, text)
    assert code == 0
    assert doc["environment"]["torch"]["is_available"] is False
    assert doc["verdict"]["status"] != "healthy"


@pytest.mark.parametrize(
    "text",
    [
        "My setup:\n  --RTX 2080 8GB\n  --Ubuntu 20.04\n  --pytorch 1.10.0\n  --cuda 11.3\n",
        "Environment\n- PyTorch: 1.13.1\n- CUDA: 11.7\n",
        "pytorch version 1.10 and the gpu stays at 0%\n",
        "Training is slow on my RTX 3090, the utilisation stays near zero\n",
    ],
)
def test_set_up_lists_are_facts_and_give_inconclusive_with_the_next_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str
) -> None:
    code, doc = _env_from(capsys, tmp_path, text)
    assert code == 0
    assert doc["verdict"]["status"] == "inconclusive"
    assert "collect_env" in doc["verdict"]["summary"] or "nvidia-smi" in doc["verdict"]["summary"]


def test_prose_without_a_single_fact_is_still_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    paste = tmp_path / "paste.txt"
    paste.write_text("Training takes forever and I do not know why. Any ideas what to look at?\n")
    assert main(["env", "--from", str(paste)]) == 2
    assert "found no PyTorch" in capsys.readouterr().err


JETSON_PLAIN = """\
Board: Jetson Xavier NX, JetPack 5.1.2
>>> import torch
>>> torch.__version__
'2.0.1'
>>> torch.cuda.is_available()
False
"""


def test_a_plain_torch_on_a_jetson_is_a_cpu_build_fixed_with_nvidias_jetpack_wheels(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, doc = _env_from(capsys, tmp_path, JETSON_PLAIN)
    assert code == 0
    assert doc["verdict"]["root_cause"] == "cpu-only-build"
    fix = _top(doc)["fix"]
    assert "developer.download.nvidia.com/compute/redist/jp/v512/pytorch/" in fix
    assert "download.pytorch.org" not in fix
    assert "driver >=" not in fix


def test_nvidias_own_jetson_build_is_not_called_a_cpu_build(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = JETSON_PLAIN.replace("'2.0.1'", "'2.0.0a0+8aa34602.nv23.05'")
    code, doc = _env_from(capsys, tmp_path, text)
    assert code == 0
    assert doc["verdict"]["root_cause"] != "cpu-only-build"


def test_l4t_marks_a_jetson_so_false_with_no_build_shown_is_a_cpu_build(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """NVIDIA's Jetson builds answer True or fail with a CUDA error; a silent False is PyPI's CPU wheel (stop 40: two
    trial reports, Xavier NX and Nano, were asked for the build they had already described). In a container (no
    NVIDIA runtime) the answer is False with any build: there the build is not blamed."""
    code, doc = _env_from(capsys, tmp_path, "L4T R35.4.1 (tegra): torch.cuda.is_available() returns false\n")
    assert code == 0
    assert doc["environment"]["host"]["jetson"]
    assert doc["verdict"]["root_cause"] == "cpu-only-build"
    inside = "Inside a docker container on the board, L4T R35.4.1: torch.cuda.is_available() returns false\n"
    code, doc = _env_from(capsys, tmp_path, inside)
    assert doc["verdict"]["root_cause"] != "cpu-only-build"


TWO_SESSIONS = """\
Inside the new docker container on the board:
>>> import torch
>>> print(torch.__version__)
2.1.0
>>> torch.cuda.is_available()
False

In the older container, started with the same arguments:
>>> import torch
>>> print(torch.__version__)
2.1.0a0+41361538.nv23.06
>>> torch.cuda.is_available()
True
"""


def test_two_sessions_that_differ_in_the_build_blame_the_build_not_the_container(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, doc = _env_from(capsys, tmp_path, TWO_SESSIONS)
    assert code == 0
    assert doc["verdict"]["root_cause"] == "cpu-only-build"
    assert doc["environment"]["torch"]["version"] == "2.1.0"


def test_a_working_session_elsewhere_is_not_container_without_gpu(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = (
        "inside my docker container\n>>> torch.cuda.is_available()\nFalse\n\nanother container\n"
        ">>> import torch\n>>> torch.cuda.is_available()\nTrue\n"
    )
    code, doc = _env_from(capsys, tmp_path, text)
    assert code == 0
    assert doc["verdict"]["root_cause"] != "container-without-gpu"


@pytest.mark.parametrize(
    "text",
    [
        'The login screen says "NVIDIA kernel module not found. Falling back to Nouveau."\n',
        "$ sudo modprobe nvidia\nmodprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n",
        "[    3.2] secureboot: Secure boot enabled\n[    5.1] [drm] Initialized nouveau 1.3.1 for 0000:01:00.0\n",
    ],
)
def test_kernel_module_messages_mean_the_driver_is_not_loaded(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str
) -> None:
    code, doc = _env_from(capsys, tmp_path, text)
    assert code == 0
    assert doc["verdict"]["root_cause"] == "driver-not-loaded"


def test_an_amd_gpu_gets_the_rocm_build(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = "I have an AMD gpu (RX 7800 XT) on Linux\n>>> torch.cuda.is_available()\nFalse\n"
    code, doc = _env_from(capsys, tmp_path, text)
    assert code == 0
    assert doc["verdict"]["root_cause"] == "no-gpu-visible"
    assert "whl/rocm" in _top(doc)["fix"]


def test_an_amd_gpu_that_a_rocm_build_cannot_open_gets_rocms_checks_not_the_build_again(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Only a ROCm build says "No HIP GPUs are available": it is installed already (pytorch#70036, a ROCm 4.2 wheel
    on a machine whose rocm tooling sees the GPU). The fix installed the ROCm build again and asked for nvidia-smi."""
    text = "I have an AMD gpu (RX 7800 XT) on Linux\nRuntimeError: No HIP GPUs are available\n"
    code, doc = _env_from(capsys, tmp_path, text)
    assert code == 0
    fix = _top(doc)["fix"]
    assert "whl/rocm" not in fix and fix.splitlines()[1].startswith("rocminfo")
    assert "usermod -aG video,render" in fix
    assert not any("nvidia-smi" in line for line in doc["environment"]["unknown"])
    # its title is the AMD GPU's (a trial: "This machine has no NVIDIA GPU that anything could use" for a ROCm user)
    assert _top(doc)["title"].startswith("torch's ROCm build cannot open the AMD GPU")


def test_a_mac_is_pointed_at_mps(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = "MacBook Pro M3, macOS 14\n>>> torch.cuda.is_available()\nFalse\n"
    code, doc = _env_from(capsys, tmp_path, text)
    assert code == 0
    assert doc["verdict"]["root_cause"] == "no-gpu-visible"
    assert "torch.backends.mps.is_available()" in _top(doc)["fix"]


def test_a_fermi_gpu_is_too_old_not_a_source_build(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = (
        "UserWarning: Found GPU0 GeForce GT 540M which is of cuda capability 2.1.\n"
        "PyTorch no longer supports this GPU because it is too old.\n"
    )
    code, doc = _env_from(capsys, tmp_path, text)
    assert code == 0
    assert doc["verdict"]["root_cause"] == "arch-not-supported"
    fix = _top(doc)["fix"]
    assert "too old" in fix
    assert "TORCH_CUDA_ARCH_LIST" not in fix


@pytest.mark.parametrize(
    ("start", "flag"),
    [
        ("$ singularity exec train.sif python check.py", "--nv"),
        ("$ srun --container-image=nvcr.io#nvidia/pytorch:23.10-py3 python check.py", "NVIDIA_VISIBLE_DEVICES"),
    ],
)
def test_other_container_runtimes_get_their_own_flag(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, start: str, flag: str
) -> None:
    text = f"{start}\nbash: nvidia-smi: command not found\n>>> torch.cuda.is_available()\nFalse\n"
    code, doc = _env_from(capsys, tmp_path, text)
    assert code == 0
    assert doc["verdict"]["root_cause"] == "container-without-gpu"
    fix = _top(doc)["fix"]
    assert flag in fix
    assert "docker run" not in fix


def test_the_api_mismatch_line_gives_both_driver_versions(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = (
        "[ 812.4] NVRM: API mismatch: the client has the version 535.183.01, but\n"
        "[ 812.4] NVRM: this kernel module has the version 535.161.08.  Please\n"
        "$ sudo dmesg | tail -1\n"
        "[ 900.1] NVRM: API mismatch: the client has the version 535.183.01, but this kernel module has the version "
        "535.161.08.\n"
    )
    code, doc = _env_from(capsys, tmp_path, text)
    assert code == 0
    assert doc["verdict"]["root_cause"] == "driver-library-mismatch"
    evidence = _top(doc)["evidence"]
    assert evidence["library_version"] == "535.183.01"
    assert evidence["kernel_module_version"] == "535.161.08"
