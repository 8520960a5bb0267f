"""`gputriage env --from` on the shapes a new user's trial of 30 fresh reports found misread (stop 36): markdown
escapes, a snippet pasted whole before its output, the answer before the question, detectron2's newer collect_env,
torch.__config__.show(), a UTF-16 file, "CUDA error: out of memory", and fixes that must hold for the user's driver,
OS and installer. Each text is our own, in the shape of what people paste."""

from __future__ import annotations

import codecs
import io
from pathlib import Path

import pytest
from rich.console import Console

from gputriage.collectors.env_text import parse_environment_text
from gputriage.commands.env import decode_report, diagnose_text
from gputriage.record.environment import Environment
from gputriage.report.terminal import environment_table
from gputriage.rules.env_facts import driver_needed

_COLAB = (
    "On Colab with the GPU runtime selected, torch cannot see a GPU:\n\n"
    "import torch\n"
    "print(torch.\\_\\_version\\_\\_)\n"
    "torch.cuda.is_available()\n\n"
    "returns:\n\n"
    "1.3.1\n"
    "False\n"
)


def test_markdown_escapes_and_a_snippet_pasted_before_its_output_are_read() -> None:
    env = parse_environment_text(_COLAB)

    assert env.torch.version == "1.3.1"
    assert env.torch.is_available is False
    assert diagnose_text(_COLAB).verdict.root_cause == "no-gpu-visible"  # the Colab runtime has no GPU attached


def test_a_backslash_in_a_code_block_is_the_machines_own() -> None:
    text = "```\nPyTorch version: 2.1.0+cu121\nC:\\_work\\torch\nIs CUDA available: True\n```\n"
    paste_env = parse_environment_text(text)

    assert paste_env.torch.is_available is True and paste_env.torch.version == "2.1.0+cu121"


def test_each_query_of_a_snippet_takes_its_own_answer_in_order() -> None:
    text = (
        "print(torch.__version__)\nprint(torch.version.cuda)\nprint(torch.cuda.is_available())\n\n2.2.0\n12.1\nFalse\n"
    )
    env = parse_environment_text(text)

    assert (env.torch.version, env.torch.cuda_version, env.torch.is_available) == ("2.2.0", "12.1", False)


def test_a_repl_line_is_still_answered_right_below() -> None:
    text = ">>> torch.__version__\n'2.2.0+cu121'\n>>> torch.cuda.is_available()\nTrue\n"
    env = parse_environment_text(text)

    assert (env.torch.version, env.torch.is_available) == ("2.2.0+cu121", True)


@pytest.mark.parametrize(
    "line",
    [
        "i get False when i run torch.cuda.is_available()",
        "I always got false from torch.cuda.is_available() on this laptop",
        "it returns False when calling cuda.is_available() in the notebook",
    ],
)
def test_the_answer_before_the_question_is_read(line: str) -> None:
    assert parse_environment_text(line + "\n").torch.is_available is False


_DETECTRON = """\
----------------------  ---------------------------------------------------------------
sys.platform            linux
Python                  3.9.7 (default, Sep 16 2021, 13:09:58) [GCC 7.5.0]
PyTorch                 1.10.0 @/opt/conda/lib/python3.9/site-packages/torch
PyTorch debug build     False
GPU available           {available}
GPU 0,1                 NVIDIA GeForce RTX 3090 (arch=8.6)
Driver version          510.47.03
CUDA_HOME               /usr/local/cuda
----------------------  ---------------------------------------------------------------
PyTorch built with:
  - GCC 7.3
  - C++ Version: 201402
  - CUDA Runtime 11.3
  - NVCC architecture flags: -gencode;arch=compute_37,code=sm_37;-gencode;arch=compute_86,code=sm_86
  - CuDNN 8.2
  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release, CUDA_VERSION=11.3, CUDNN_VERSION=8.2.0, TORCH_VERSION=1.10.0
"""


def test_detectron2s_newer_collect_env_and_torch_config_show_are_read() -> None:
    env = parse_environment_text(_DETECTRON.format(available="Yes"))

    t, d = env.torch, env.driver
    assert (t.version, t.is_available, t.cuda_version) == ("1.10.0", True, "11.3")
    assert t.arch_list == ["sm_37", "sm_86"]
    assert d.driver_version == "510.47.03"
    assert [(g.index, g.name, g.compute_capability) for g in d.devices] == [
        (0, "NVIDIA GeForce RTX 3090", "8.6"),
        (1, "NVIDIA GeForce RTX 3090", "8.6"),
    ]
    assert diagnose_text(_DETECTRON.format(available="Yes")).verdict.status == "healthy"
    assert parse_environment_text(_DETECTRON.format(available="False")).torch.is_available is False


def test_a_config_show_of_a_cpu_build_is_evidence_of_one() -> None:
    text = (
        "PyTorch                2.1.0 @C:\\ProgramData\\miniconda3\\Lib\\site-packages\\torch\n"
        "GPU available          False\n"
        "PyTorch built with:\n"
        "  - C++ Version: 199711\n"
        "  - MSVC 192930151\n"
        "  - CPU capability usage: AVX2\n"
        "  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release, CXX_COMPILER=C:/cb/cl.exe, TORCH_VERSION=2.1.0\n"
    )
    env = parse_environment_text(text)

    assert env.torch.cpu_build_evidence is not None and "no CUDA runtime" in env.torch.cpu_build_evidence
    assert env.torch.cuda_version is None


def test_a_cut_architecture_list_is_not_read_as_the_whole_list() -> None:
    flags = ";".join(f"-gencode;arch=compute_{cc},code=sm_{cc}" for cc in (50, 60, 70, 75, 80, 86, 90) * 4)
    text = f"PyTorch built with:\n  - CUDA Runtime 12.1\n  - NVCC architecture flags: {flags}\n"
    env = parse_environment_text(text)

    assert env.torch.cuda_version == "12.1" and env.torch.arch_list is None


def test_cuda_error_out_of_memory_proves_torch_reached_the_gpu() -> None:
    text = "Tesla V100 on a shared box\nRuntimeError: CUDA error: out of memory\n"
    diag = diagnose_text(text)

    assert parse_environment_text(text).torch.gpu_use_evidence is not None
    assert diag.verdict.root_cause is None and diag.verdict.status != "inconclusive"


@pytest.mark.parametrize(
    "encode",
    [
        lambda t: codecs.BOM_UTF16_LE + t.encode("utf-16-le"),  # PowerShell 5's `>`
        lambda t: t.encode("utf-16-le"),
        lambda t: codecs.BOM_UTF16_BE + t.encode("utf-16-be"),
        lambda t: codecs.BOM_UTF8 + t.encode("utf-8"),
    ],
)
def test_a_report_saved_as_utf16_is_read_not_refused(encode: object) -> None:
    text = "PyTorch version: 2.1.0+cpu\nIs CUDA available: False\n"
    raw = encode(text)  # type: ignore[operator]

    assert decode_report(raw).replace("\r", "") == text


def test_binary_that_looks_like_utf16_is_still_binary() -> None:
    assert "\x00" in decode_report(b"\x00\xff" * 100) or "ÿ" not in decode_report(b"\x00\xff" * 100)


def test_an_unknown_build_is_not_called_a_cpu_build() -> None:
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(environment_table(parse_environment_text("PyTorch 1.9.0 @/opt/torch\nGPU available  No\n")))
    shown = console.file.getvalue()  # type: ignore[attr-defined]

    assert "torch    1.9.0 (build unknown, install unknown), not available" in shown
    assert "CPU build" not in shown


def test_a_paste_without_nvidia_smi_counts_no_nvml_gpus() -> None:
    text = (
        "PyTorch 0.4.0 built from source, macOS 10.13 High Sierra\n"
        ">>> torch.cuda.is_available()\nFalse\n"
        "AssertionError: \nFound no NVIDIA driver on your system. Please check that you\n"
    )
    top = diagnose_text(text).findings[0]

    assert top.code == "no-gpu-visible"
    assert top.evidence.get("nvml_gpus") is None
    assert top.evidence["os"] == "darwin"
    assert "torch 0.4.0 predates MPS" in top.fix
    assert all(line.startswith(("#", "python ")) for line in top.fix.splitlines())  # every line pastes into a shell


def test_the_arch_fix_names_both_the_build_the_driver_supports_and_the_newer_one_it_runs() -> None:
    text = (
        "NVIDIA TITAN Xp with CUDA capability sm_61 is not compatible with the current PyTorch installation.\n"
        "The current PyTorch install supports CUDA capabilities sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120.\n"
        "| NVIDIA-SMI 535.183.01             Driver Version: 535.183.01   CUDA Version: 12.2     |\n"
    )
    fix = diagnose_text(text).findings[0].fix

    assert "torch==2.7.0 --index-url https://download.pytorch.org/whl/cu118" in fix
    assert "torch 2.14 + CUDA 12.6 has them too, through CUDA 12.x minor version compatibility" in fix
    assert "torchvision / torchaudio, where installed" in fix


def test_with_the_driver_unknown_the_arch_fix_takes_the_build_that_needs_the_oldest_driver() -> None:
    text = (
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.\n"
        "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n"
    )
    fix = diagnose_text(text).findings[0].fix

    # the newest release's build for the oldest driver that has sm_120: 2.14 has no CUDA 12.x one; not cu132
    assert "torch==2.14.0 --index-url https://download.pytorch.org/whl/cu130" in fix


def test_the_driver_a_cuda_needs_names_the_minor_compatibility_floor_too() -> None:
    env = Environment(source="text")
    env.host.os_name = "linux"

    assert driver_needed("12.6", env) == (
        "NVIDIA driver >= 560.28.03 (>= 525.60.13 through CUDA 12.x minor version compatibility)"
    )


def test_the_console_script_reads_a_utf16_report(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "env.txt"
    text = "PyTorch version: 2.1.0+cpu\r\nIs CUDA available: False\r\n"
    path.write_bytes(codecs.BOM_UTF16_LE + text.encode("utf-16-le"))
    command = [sys.executable, "-m", "gputriage", "env", "--from", str(path), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)

    assert done.returncode == 0, done.stderr
    assert '"cpu-only-build"' in done.stdout


def test_a_container_beside_a_test_run_with_gpus_is_not_said_to_be_started_without_them() -> None:
    """gpu-jupyter#22: `docker run --gpus all nvidia/cuda ... nvidia-smi` worked; the notebook's container had no
    nvidia-smi. The title said the container "was started without access to the GPU" beside `gpu_flag_given yes`."""
    text = (
        "docker run --gpus all nvidia/cuda:10.1-base-ubuntu18.04 nvidia-smi\n"
        "| NVIDIA-SMI 450.51.05    Driver Version: 450.51.05    CUDA Version: 11.0     |\n"
        'torch.cuda.is_available() returns "False".\n'
        '"!nvidia-smi" in the notebook: "/bin/bash: nvidia-smi: command not found"\n'
    )
    top = diagnose_text(text).findings[0]

    assert top.code == "container-without-gpu" and top.evidence["gpu_flag_given"] is True
    assert top.title == "This runs inside a docker container without access to the GPU"


def test_an_install_command_for_another_torch_does_not_name_this_ones_companions() -> None:
    """pytorch#93908: `!pip install torch==1.7.0+cu101 torchvision==0.6.0+cu101` earlier, and a failing torch 1.13.1
    from condacolab. The fix moved "torchvision 0.6.0+cu101", a package of the other install."""
    text = (
        "!pip install torch==1.7.0+cu101 torchvision==0.6.0+cu101 -f https://download.pytorch.org/whl/torch_stable.html\n"
        "PyTorch version: 1.13.1\nCUDA used to build PyTorch: Could not collect\nIs CUDA available: False\n"
    )
    env = parse_environment_text(text)

    assert env.torch.version == "1.13.1" and env.torch.companions == {}
    same = parse_environment_text(text.replace("torch==1.7.0+cu101", "torch==1.13.1+cu117"))
    assert same.torch.companions == {"torchvision": "0.6.0+cu101"}


def test_what_the_reporter_tried_is_their_own_state_not_a_suggestion() -> None:
    """pytorch#40682: "I don't know why torch.cuda.is_available() always return false? I try to change pytorch
    version ..." on one line: "try" read as a suggestion's cue, the line as advice, and the quoted collect_env's
    "Is CUDA available: Yes" made the report healthy."""
    text = (
        "I don't know why torch.cuda.is_available() always return false? I try to change pytorch version to "
        "1.4.0+cu101, but the problem still exist.\n\n"
        "> PyTorch version: 1.5.0+cu101\n> CUDA used to build PyTorch: 10.1\n> Is CUDA available: Yes\n"
        "> GPU models and configuration:\n> GPU 0: TITAN RTX\n> Nvidia driver version: 442.92\n"
    )
    assert parse_environment_text(text).torch.is_available is False
    assert diagnose_text(text).verdict.status != "healthy"


def test_no_kernel_image_with_a_gpu_named_in_prose_gets_that_gpus_build() -> None:
    """nunif#308: "no kernel image is available" on Windows, "Would love to use my RTX 5090", no GPU listing. The
    fix was the generic get_arch_list check; the GPU the reporter names gives sm_120 and its build."""
    text = (
        "RuntimeError:\nCUDA error: no kernel image is available for execution on the device\n"
        "I am running this on windows, using cpu works, but is very slow. Would love to use my RTX 5090.\n"
    )
    top = diagnose_text(text).findings[0]

    assert top.code == "arch-not-supported" and top.evidence["compute_capability"] == "12.0"
    assert "sm_120" in top.title and "RTX 5090" in top.title
    assert "--index-url https://download.pytorch.org/whl/cu130" in top.fix
    assert "(named in the text)" in str(top.evidence["gpu"])
