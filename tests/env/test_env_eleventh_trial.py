"""`gputriage env --from` on what an eleventh trial of fresh reports found misread. Each text is our own, in the shape
of what people paste."""

from __future__ import annotations

from env_fixtures import top_of_text as _top

from gputriage.collectors.env_text import parse_environment_text
from gputriage.commands.env import diagnose_text

_CONDA_INFO_JETSON = (
    "I am trying to install pytorch on a jetson NX, torch.cuda.is_available() gives False\n"
    "     active environment : track\n"
    "         python version : 3.7.1.final.0\n"
    "       virtual packages : __cuda=10.2=0\n"
    "                          __linux=4.9.253=0\n"
    "                          __glibc=2.27=0\n"
    "                          __archspec=1=aarch64\n"
)


def test_a_jetsons_generation_names_the_python_its_wheels_need() -> None:
    """pytorch#67997: a Jetson on JetPack 4 (kernel 4.9, CUDA 10.2, shown only by conda info's virtual packages) in a
    Python 3.7 environment: NVIDIA's JetPack 4 wheels are cp36 only, so the fix's wheel would not install there."""
    env = parse_environment_text(_CONDA_INFO_JETSON)
    assert env.host.jetson and env.host.jetpack_major == 4
    assert env.driver.cuda_driver_version == "10.2"
    finding = diagnose_text(_CONDA_INFO_JETSON).findings[0]
    assert finding.code == "cpu-only-build"
    assert "built for Python 3.6 only, and this environment has Python 3.7" in finding.fix
    assert "python=3.6" in finding.fix


def test_a_jetson_python_that_matches_its_wheels_gets_no_note() -> None:
    text = _CONDA_INFO_JETSON.replace("3.7.1", "3.6.9")
    assert "built for Python" not in diagnose_text(text).findings[0].fix
    orin = text.replace("__linux=4.9.253", "__linux=5.15.136").replace("__cuda=10.2", "__cuda=12.6")
    assert parse_environment_text(orin).host.jetpack_major == 6
    assert "JetPack 6 are built for Python 3.10 only, and this environment has Python 3.6" in (
        diagnose_text(orin).findings[0].fix
    )


def test_a_conda_pin_of_the_same_numbers_is_no_tegra_kernel() -> None:
    """A conda export's "typing-extensions=4.9.0=py" is no kernel release."""
    text = _CONDA_INFO_JETSON.replace("__linux=4.9.253=0", "typing-extensions=4.9.0=pyha770c72_0")
    text = text.replace("__cuda=10.2=0", "")
    assert parse_environment_text(text).host.jetpack_major is None


def test_a_rocm_torch_said_to_answer_true_is_healthy() -> None:
    """rocm-gfx803#19: "torch.cuda.is_available() is able to return true now" beside rocminfo's gfx803: was IDLE
    no-gpu-visible, and a fix that replaced the working build with rocm7.2 (no gfx803 kernels)."""
    text = (
        "Now I am able to import torch and the torch.cuda.is_available() is able to return true now.\n"
        "  Name:                    gfx803\n  Marketing Name:          Radeon RX 580 Series\n"
    )
    assert _top(text)[0] == "healthy"


def test_invalid_device_ordinal_is_the_codes_index_even_under_wsl() -> None:
    """TaskMatrix#154: `cuda:6` on a one-GPU machine, and a commenter on WSL: was `wsl --update` and a driver update."""
    _, code, title, fix = _top("RuntimeError: CUDA error: invalid device ordinal\nSame issue on ubuntu WSL\n")
    assert code == "cuda-init-failed" and "GPU index" in title
    assert "wsl --update" not in fix and "use an index below that count" in fix


def test_an_intel_igpu_said_in_prose_gets_no_gpus_all_line() -> None:
    """ai-dock/comfyui#79: a container with no NVIDIA GPU, on a machine whose Intel CPU has an integrated GPU: was
    "the report says the machine has no GPU" and `docker run --gpus all`."""
    text = (
        "docker container fails due to no Nvidia GPU:\n> RuntimeError: Found no NVIDIA driver on your system.\n"
        "my Intel CPU also has an integrated GPU and I would like to use that.\n"
    )
    _, code, title, fix = _top(text)
    assert code == "no-gpu-visible" and "Intel integrated GPU" in title
    assert "--gpus" not in fix.replace("(not --gpus", "")


def test_a_quoted_answer_and_an_old_windows_build_under_wsl() -> None:
    """WSL#7056: `'torch.cuda.is_available()' always returns 'false'` was not read; Windows 10 build 19042 (20H2)
    predates GPU access in WSL 2 (21H2, build 19044)."""
    text = (
        "Microsoft Windows [Version 10.0.19042.1052]\n- [X] WSL 2\nKernel Version 5.4.72\n"
        "While using the pytorch package in python, 'torch.cuda.is_available()' always returns 'false' in wsl.\n"
    )
    env = parse_environment_text(text)
    assert env.torch.is_available is False and env.host.windows_build == 19042
    assert env.host.wsl_kernel == "5.4.72"
    _, code, title, fix = _top(text)
    assert code == "no-gpu-visible" and "build 19042" in title and "winver" in fix
    assert title.startswith("WSL 2 cannot reach the NVIDIA GPU here")  # not "This machine has no NVIDIA GPU"


def test_two_interpreters_answering_true_and_false_are_judged() -> None:
    """VQGAN-CLIP-Docker#6: `python3 -c` gives FALSE, `python -c` gives TRUE ("Try as I might" is no suggestion): was
    refused with exit 2 as having no facts."""
    text = (
        "Try as I might I keep getting FALSE  for\n\n"
        'python3 -c "import torch; print(torch.cuda.is_available());"\n\n'
        "I have re-installed CUDA and all my drivers.\n\n"
        'python -c "import torch; print(torch.cuda.is_available());"\n\nresults in TRUE\n'
    )
    env = parse_environment_text(text)
    assert env.torch.is_available is False and env.torch.available_elsewhere == "unknown"
    _, code, title, _ = _top(text)
    assert code == "cuda-init-failed" and "another interpreter or environment" in title


def test_a_slurm_step_without_a_gpu_request() -> None:
    """synapse#199: True on the login node, False under `srun`: the step asked for no GPU."""
    text = (
        'python -c "import torch; print(torch.cuda.is_available())"\n# True\n'
        'srun python -c "import torch; print(torch.cuda.is_available())"\n# False\n'
    )
    fix = _top(text)[3]
    assert 'srun --gres=gpu:1 python -c "import torch; print(torch.cuda.is_available())"' in fix


def test_a_blackwell_gpu_with_the_driver_unknown_names_the_build_for_older_drivers() -> None:
    """FramePack#550: an RTX 5090 on a build without sm_120, driver not shown: the newest release's cu130 build wants
    a 580 driver; the cu128 build, on 570, is named beside it."""
    text = (
        "PyTorch version: 2.6.0+cu124\nCUDA used to build PyTorch: 12.4\nIs CUDA available: True\n"
        "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 5090\n"
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.\n"
    )
    fix = _top(text)[3]
    assert "# with an older driver (from 57" in fix and "--index-url https://download.pytorch.org/whl/cu12" in fix
    p100 = text.replace("RTX 5090", "Tesla P100-PCIE-16GB").replace("sm_120", "sm_60")
    assert "torch 1.1" not in _top(p100)[3]  # the major just below, in its newest release: not a 2019 one


def test_a_stated_jetpack_wins_over_the_l4t_table_and_its_python_is_named() -> None:
    """pinokio#1027: "L4T Release: R35.4.1" then "JetPack Version: 5.1.2" and "Python Version: 3.10": was jp/v51 and
    no word that JetPack 5's wheels are cp38 only."""
    text = (
        "* **Device:** Jetson AGX Orin\n* **L4T Release:** R35.4.1\n* **JetPack Version:** 5.1.2\n"
        "* **Python Version:** 3.10 (Virtual Environment)\n`pip install torch` gives a CPU build: "
        "torch.cuda.is_available() returns False\n"
    )
    env = parse_environment_text(text)
    assert env.host.jetpack_version == "5.1.2" and env.host.python_version == "3.10"
    fix = _top(text)[3]
    assert "/jp/v512/pytorch/" in fix and "JetPack 5 are built for Python 3.8 only" in fix


def test_a_python_said_in_a_sentence_pins_the_rocm_fix() -> None:
    """ROCm#2354: "I use torch-cpu because I use python 3.7" on an RX 6800: the newest ROCm index has no cp37 wheel."""
    text = (
        "ROCm5.4.3 and RX6800. rocminfo shows gfx1030.\n"
        "I use torch-cpu because I use python 3.7, torch.cuda.is_available() returns False\n"
    )
    assert parse_environment_text(text).host.python_version == "3.7"
    assert "--index-url https://download.pytorch.org/whl/rocm5.2" in _top(text)[3]


def test_rosetta_on_an_apple_silicon_mac_is_the_verdict_not_a_note() -> None:
    """pytorch#146236: collect_env on an M2 Pro with `OS: macOS 15.3 (x86_64)`; MPS's bf16 refused ("only supported
    on MacOS 14 or newer"): the Rosetta note sat under an INCONCLUSIVE verdict."""
    text = (
        "MPS BFloat16 is only supported on MacOS 14 or newer\nPyTorch version: 2.6.0\nIs debug build: False\n"
        "CUDA used to build PyTorch: None\nOS: macOS 15.3 (x86_64)\nPython platform: macOS-10.16-x86_64-i386-64bit\n"
        "CPU:\nApple M2 Pro\n"
    )
    status, code, title, fix = _top(text)
    assert status != "inconclusive" and code == "no-gpu-visible" and "Rosetta" in title
    assert "arm64" in fix


def test_torchs_own_arch_warning_is_no_ones_advice() -> None:
    """Kaggle docker-python#1546: the arch list came after torch's "Please install PyTorch with a following CUDA
    configurations" (a suggestion cue), so it was read as advice and the evidence had no build_arch_list."""
    text = (
        "/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:435: UserWarning:\n"
        "    Please install PyTorch with a following CUDA\n    configurations:  12.6 following instructions at\n"
        "    https://pytorch.org/get-started/locally/\n\n  queued_call()\n"
        "/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:435: UserWarning:\n"
        "Tesla P100-PCIE-16GB with CUDA capability sm_60 is not compatible with the current PyTorch installation.\n"
        "The current PyTorch install supports CUDA capabilities sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120.\n"
    )
    assert parse_environment_text(text).torch.arch_list == [
        "sm_70",
        "sm_75",
        "sm_80",
        "sm_86",
        "sm_90",
        "sm_100",
        "sm_120",
    ]


def test_an_install_spec_with_pluses_gives_the_release_python_and_cuda() -> None:
    """mmdetection-mini#30: "按照pytorch1.3.0+Python 3.6+CUDA10.1来装的" and "found version 10000": was told
    torch 1.7.0+cu92 (another release); the thread's answer keeps 1.3.0, on cu100."""
    text = (
        "安装时，按照pytorch1.3.0+Python 3.6+CUDA10.1来装的，训练时报错"
        "The NVIDIA driver on your system is too old (found version 10000)."
    )
    env = parse_environment_text(text)
    assert (env.torch.version, env.host.python_version, env.host.cuda_toolkit_version) == ("1.3.0", "3.6", "10.1")
    assert "torch==1.3.0+cu100" in _top(text)[3]


def test_an_arch_list_from_the_tables_says_so() -> None:
    """index-tts#815: "PyTorch: 2.8.0+cu128" (with a full-width colon) on a P100: the evidence's arch list came from
    the release table, shown as if the paste had it."""
    text = _collect_env_like("2.8.0+cu128", "12.8", "Tesla P100-PCIE-16GB")
    finding = next(f for f in diagnose_text(text).findings if f.code == "arch-not-supported")
    assert finding.evidence["build_arch_list_from"] == "the release's published arch list (not in the text)"


def _collect_env_like(torch: str, cuda: str, gpu: str) -> str:
    return (
        f"PyTorch version: {torch}\nCUDA used to build PyTorch: {cuda}\nIs CUDA available: True\n"
        f"GPU models and configuration: GPU 0: {gpu}\nNvidia driver version: 570.124.06\n"
    )


def test_the_answer_ending_the_line_above_a_lone_call_is_read() -> None:
    """Autoformer#25: "... the following returns false" / "`torch.cuda.is_available()`" ("if you do this" is no
    suggestion), with `export CUDA_VISIBLE_DEVICES=1` on a one-GPU system."""
    text = (
        "on systems with 1 GPU\n`export CUDA_VISIBLE_DEVICES=1`\n"
        "The issue is if you do this on a system with a single GPU the following returns false\n"
        "`torch.cuda.is_available()`\n"
    )
    assert parse_environment_text(text).torch.is_available is False
    assert _top(text)[1] == "cuda-visible-devices"


def test_an_answer_that_bounced_back_is_read() -> None:
    """ArjunaUsers#45: "when I type in torch.cuda.is_available() in python3, it bounced back "False"" on a Slurm node:
    refused with exit 2 as having no facts; with no versions, inconclusive is the answer."""
    text = (
        'I\'m sure I typed in "module load cuda", but when I type in torch.cuda.is_available() in python3, it bounced '
        'back "False".\n'
    )
    assert parse_environment_text(text).torch.is_available is False
    assert diagnose_text(text).verdict.status == "inconclusive"
