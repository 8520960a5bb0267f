"""The pasted-text parser: each kind of block people paste, alone, cut short, or mixed with prose."""

from __future__ import annotations

import pytest
from env_fixtures import codes, diagnose_env
from hypothesis import given, settings
from hypothesis import strategies as st

from gputriage.collectors.env_text import cuda_error_code, parse_environment_text
from gputriage.errors import InputError

OLD_COLLECT_ENV = """\
PyTorch version: 1.0.1.post2
Is debug build: No
CUDA used to build PyTorch: 10.0.130

OS: Ubuntu 16.04.5 LTS
GCC version: (Ubuntu 5.4.0-6ubuntu1~16.04.10) 5.4.0 20160609
CMake version: version 3.5.1

Python version: 3.6
Is CUDA available: Yes
CUDA runtime version: 9.0.176
GPU models and configuration: GPU 0: GeForce GTX 1080 Ti
Nvidia driver version: 384.130
cuDNN version: Could not collect

Versions of relevant libraries:
[pip] numpy==1.16.2
[conda] pytorch                   1.0.1           py3.6_cuda10.0.130_cudnn7.4.2_2    pytorch
"""

NEW_SMI = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
|=========================================+========================+======================|
|   0  NVIDIA GeForce RTX 4090        Off |   00000000:01:00.0  On |                  Off |
|   1  NVIDIA GeForce RTX 4090        Off |   00000000:02:00.0 Off |                  Off |
"""


def test_old_collect_env_format() -> None:
    env = parse_environment_text(OLD_COLLECT_ENV)

    assert env.torch.version == "1.0.1.post2"
    assert env.torch.cuda_version == "10.0.130"
    assert env.torch.is_cpu_build is False
    assert env.torch.is_available is True  # "Yes" in the old format
    assert env.host.cuda_toolkit_version == "9.0.176"  # the toolkit, not what torch uses
    assert [d.name for d in env.driver.devices] == ["GeForce GTX 1080 Ti"]
    # 384.130 runs CUDA 9.0 at most; the build needs 10.0.
    diag = diagnose_env(env)
    assert diag.verdict.root_cause == "driver-too-old"
    assert diag.findings[0].evidence["min_driver_for_torch_cuda"] == "410.48"


def test_nvidia_smi_table_gives_driver_cuda_and_gpus() -> None:
    env = parse_environment_text(NEW_SMI + "\n>>> torch.__version__\n'2.13.0+cpu'\n")

    assert env.driver.driver_version == "550.54.15"
    assert env.driver.cuda_driver_version == "12.4"
    assert [(d.index, d.name, d.pci_bus_id) for d in env.driver.devices] == [
        (0, "NVIDIA GeForce RTX 4090", "00000000:01:00.0"),
        (1, "NVIDIA GeForce RTX 4090", "00000000:02:00.0"),
    ]


def test_cpu_wheel_next_to_two_4090s_gets_the_cuda_wheel_the_driver_runs() -> None:
    env = parse_environment_text(NEW_SMI + "\n$ pip list | grep torch\ntorch==2.13.0+cpu\n")

    top = diagnose_env(env).findings[0]

    assert top.code == "cpu-only-build"
    assert top.evidence["gpus"] == 2
    assert "torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126" in top.fix
    assert "minor version compatibility" in top.fix  # cu126 on a CUDA 12.4 driver


@pytest.mark.parametrize(
    ("text", "root_cause"),
    [
        ("$ nvidia-smi\nNo devices were found\n", "no-gpu-visible"),
        (
            "$ nvidia-smi\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.\n",
            "driver-not-loaded",
        ),
        ("CUDA_VISIBLE_DEVICES= python train.py\n>>> torch.cuda.is_available()\nFalse\n", "cuda-visible-devices"),
        ("export CUDA_VISIBLE_DEVICES=-1\n", "cuda-visible-devices"),
        ("RuntimeError: CUDA error: system not yet initialized\n", "cuda-init-failed"),
        ("Traceback (most recent call last):\nModuleNotFoundError: No module named 'torch'\n", "torch-not-installed"),
        ('os.environ["CUDA_VISIBLE_DEVICES"] = ""\nprint(torch.cuda.device_count())\n0\n', "cuda-visible-devices"),
    ],
)
def test_short_pastes(text: str, root_cause: str) -> None:
    assert diagnose_env(parse_environment_text(text)).verdict.root_cause == root_cause


def test_fabric_manager_error_is_named_and_explained() -> None:
    env = parse_environment_text("RuntimeError: CUDA error: system not yet initialized\n")

    top = diagnose_env(env).findings[0]

    assert top.evidence["cuda_error"] == 802
    assert "Fabric Manager" in top.title
    assert "nvidia-fabricmanager" in top.fix
    # a machine that never had it has no unit to enable: its package comes first (pytorch#35710)
    assert top.fix.index("apt-get install nvidia-fabricmanager-<branch>") < top.fix.index("systemctl enable")


def test_new_style_capability_warning_of_torch_2_13() -> None:
    text = (
        "UserWarning: Found GPU0 NVIDIA GeForce GTX 770 which is of compute capability (CC) 3.0.\n"
        "The following list shows the CCs this version of PyTorch was built for and the hardware CCs it supports:\n"
        "PyTorch version: 2.13.0+cu126\n"
    )
    env = parse_environment_text(text)

    top = diagnose_env(env).findings[0]

    assert env.driver.devices[0].compute_capability == "3.0"
    assert top.code == "arch-not-supported"
    # The last published builds with sm_30 kernels: the 1.3 conda packages (moi90/pytorch_compute_capabilities); with
    # the driver unknown, the one that needs the oldest driver; those packages need an env with an old Python.
    lines = top.fix.splitlines()
    assert lines[0] == "conda install pytorch==1.3.0 cudatoolkit=10.0 -c pytorch"
    assert lines[1] == "# CUDA 10.0 needs NVIDIA driver >= 410.48"
    assert "conda create -n torch13 python=3.7" in top.fix


def test_an_arch_list_from_the_build_table_catches_a_blackwell_card() -> None:
    # pytorch#150733: an RTX 5090 (sm_120) on 2.6.0+cu126, whose arch list stops at sm_90.
    text = (
        "PyTorch version: 2.6.0+cu126\nIs CUDA available: True\n"
        "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 5090 D\nNvidia driver version: 570.124.04\n"
    )
    env = parse_environment_text(text)
    env.driver.devices[0].compute_capability = "12.0"  # what NVML would add on the reporter's machine

    top = diagnose_env(env).findings[0]

    assert top.code == "arch-not-supported"
    assert top.evidence["build_arch_list"].endswith("sm_90")
    assert "cu128" in top.fix or "cu129" in top.fix or "cu13" in top.fix


def test_missing_facts_are_listed_not_guessed() -> None:
    env = parse_environment_text(">>> import torch\n>>> torch.cuda.is_available()\nFalse\n")

    diag = diagnose_env(env)

    assert env.torch.is_available is False
    assert env.driver.driver_version is None and env.torch.version is None
    assert any(u.startswith("could not tell the NVIDIA driver version") for u in env.unknown)
    assert any(u.startswith("could not tell which GPUs") for u in env.unknown)
    assert codes(diag) == []  # nothing is claimed without evidence
    assert diag.verdict.status == "inconclusive"  # never "healthy" about what the text does not say
    assert diag.ladder[0].status == "skipped"
    assert diag.ladder[0].reason and "does not say" in diag.ladder[0].reason
    assert "`nvidia-smi`" in diag.verdict.summary  # what to paste next


def test_prose_around_the_blocks_is_ignored() -> None:
    text = "Hi all, I updated my driver yesterday and now:\n\n" + NEW_SMI + "\nAny idea? I use torch==2.13.0+cu130.\n"
    env = parse_environment_text(text)

    diag = diagnose_env(env)

    assert env.driver.driver_version == "550.54.15"  # the table, not a number from the prose
    assert env.torch.cuda_version == "13.0"
    assert diag.verdict.root_cause == "driver-too-old"  # CUDA 13.0 needs >= 580.65.06


def test_a_cut_collect_env_still_gives_what_it_has() -> None:
    env = parse_environment_text("Collecting environment information...\nPyTorch version: 2.1.0+cu121\nIs debug bu")

    assert env.torch.version == "2.1.0+cu121"
    assert env.torch.cuda_version == "12.1"
    assert env.torch.is_cpu_build is False


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("Error 804: forward compatibility was attempted on non supported HW", 804),
        ("THCudaCheck FAIL file=x line=1 error=38 : no CUDA-capable device is detected", 38),
        ("CUDA unknown error - this may be due to an incorrectly set up environment", 999),
        ("CUDA driver version is insufficient for CUDA runtime version", 35),
        ("nothing to see", None),
    ],
)
def test_cuda_error_numbers(text: str, code: int | None) -> None:
    assert cuda_error_code(text) == code


def test_prose_alone_is_an_input_error() -> None:
    with pytest.raises(InputError, match="found no PyTorch"):
        parse_environment_text("Why is my model so slow? It takes forever.")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_any_text_gives_an_environment_or_one_input_error(text: str) -> None:
    try:
        env = parse_environment_text(text)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    diagnose_env(env)  # the rules accept whatever the parser made of it


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=len(NEW_SMI + OLD_COLLECT_ENV)))
def test_a_report_cut_anywhere_still_parses(cut: int) -> None:
    text = (OLD_COLLECT_ENV + NEW_SMI)[:cut]
    try:
        env = parse_environment_text(text)
    except InputError:
        return
    diagnose_env(env)
