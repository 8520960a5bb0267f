"""`gputriage env --from` on what a fourth trial of 30 fresh reports found misread (stop 38): framework start banners
(Ultralytics), the Python a traceback ran, fixes that must install on that Python, the companions of a CPU build, and
the arch lists of 1.x releases. Each text is our own, in the shape of what people paste."""

from __future__ import annotations

from gputriage.collectors.env_text import parse_environment_text
from gputriage.commands.env import diagnose_text
from gputriage.data.cuda_tables import arch_list_for


def test_a_frameworks_banner_with_a_cpu_build_is_that_build() -> None:
    """ultralytics#8869: the banner `torch-2.2.1+cpu CPU (...)` was the only fact (was: exit 2, no facts found)."""
    text = (
        "training on my 4070 is super slow, it uses the cpu\n"
        "Ultralytics YOLOv8.0.196  Python-3.10.5 torch-2.2.1+cpu CPU (12th Gen Intel Core(TM) i5-12600KF)\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "cpu-only-build"
    assert parse_environment_text(text).host.python_version == "3.10.5"
    assert "torch==2.2.1 --index-url https://download.pytorch.org/whl/cu" in top.fix


def test_two_banners_one_on_the_gpu_are_two_sessions_and_the_failing_one_is_judged() -> None:
    text = (
        "old env works:\n"
        "Ultralytics YOLOv8.0.53 Python-3.9.1 torch-1.8.1+cu111 CUDA:0 (NVIDIA GeForce RTX 3070, 8192MiB)\n"
        "new env does not:\n"
        "Ultralytics YOLOv8.0.54 Python-3.10.6 torch-2.0.0+cpu CPU\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "cpu-only-build" and "2.0.0+cpu" in top.title
    # the CPU companions go too, where installed: the same commands with them, pinned to 2.0.0's
    assert "# python -m pip uninstall -y torch torchvision torchaudio" in top.fix
    assert "# python -m pip install torch==2.0.0 torchvision==0.15.1 torchaudio==2.0.1 --index-url" in top.fix


def test_a_banner_that_names_the_gpu_says_torch_reached_it() -> None:
    """ultralytics#20123: the banner names the GPU with its memory only when torch.cuda.is_available() is True."""
    text = (
        "gpu usage stays low while training\n"
        "Ultralytics 8.3.106 Python-3.13.3 torch-2.6.0+cu126 CUDA:0 (NVIDIA GeForce RTX 4080 SUPER, 16376MiB)\n"
    )
    diag = diagnose_text(text)
    assert diag.verdict.root_cause is None
    assert not [f for f in diag.findings if f.rung == 1 and f.severity.value in ("critical", "warning")]
    assert parse_environment_text(text).torch.is_available is True


def test_a_fix_to_a_release_without_wheels_for_the_tracebacks_python_says_to_make_one_first() -> None:
    """stable-diffusion-k8s#10: an H100 under torch 1.x in /root/miniconda3/lib/python3.8: torch 2.14 has no wheel for
    Python 3.8, so the pasted command failed."""
    text = (
        "/root/miniconda3/lib/python3.8/site-packages/torch/cuda/__init__.py:145: UserWarning:\n"
        "NVIDIA H100 80GB HBM3 with CUDA capability sm_90 is not compatible with the current PyTorch installation.\n"
        "The current PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86.\n"
    )
    top = diagnose_text(text).findings[0]
    assert parse_environment_text(text).host.python_version == "3.8"
    assert top.code == "arch-not-supported"
    # the newest release with sm_90 kernels and a Python 3.8 wheel (2.4's build script put sm_90 in its CUDA 11.8
    # builds): a command that runs where the user is
    assert "torch==2.4.0 --index-url https://download.pytorch.org/whl/cu118" in top.fix
    # an RTX 5090 (sm_120) has kernels only from 2.7 on, with no wheel for Python 3.8: make one first
    blackwell = text.replace(
        "NVIDIA H100 80GB HBM3 with CUDA capability sm_90", "NVIDIA GeForce RTX 5090 with CUDA capability sm_120"
    )
    fix = diagnose_text(blackwell).findings[0].fix
    assert "and this environment runs Python 3.8" in fix and "conda create -n torch python=3.12" in fix


def test_a_cpu_build_fix_for_python_3_8_takes_the_newest_release_with_its_wheels() -> None:
    text = (
        "C:\\Users\\me\\AppData\\Local\\Programs\\Python\\Python38\\lib\\site-packages\\torch\\cuda\\__init__.py:\n"
        "AssertionError: Torch not compiled with CUDA enabled\n"
    )
    top = diagnose_text(text).findings[0]
    assert parse_environment_text(text).host.python_version == "3.8"
    assert top.code == "cpu-only-build"
    assert "torch==2.4.0 --index-url https://download.pytorch.org/whl/cu118" in top.fix


def test_an_a100_under_torch_1_10_gets_its_own_releases_cuda_11_build() -> None:
    """WPFS#3: torch 1.10.1 (CUDA 10.2, kernels up to sm_75) on an A100; 1.10.1+cu111 has sm_80 (conda's cuobjdump),
    which the thread installed (was: torch 2.13)."""
    assert "sm_80" in (arch_list_for("1.10.1", "11.1") or ())
    text = (
        "torch.__version__ 1.10.1+cu102\n"
        "NVIDIA A100-SXM4-40GB with CUDA capability sm_80 is not compatible with the current PyTorch installation.\n"
        "| NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: 11.4     |\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "arch-not-supported"
    assert "torch==1.10.1+cu113" in top.fix


def test_cuda_visible_devices_all_is_nvidia_visible_devices_word_and_hides_every_gpu() -> None:
    """ComfyUI-Docker#60: compose `environment: CUDA_VISIBLE_DEVICES: all`; "all" names no GPU, CUDA stops there
    (was: a generic cuda-init-failed, the setting unread)."""
    text = (
        "RuntimeError: No CUDA GPUs are available\n"
        "```yml\nservices:\n  comfyui:\n    runtime: nvidia\n    environment:\n"
        "      CUDA_VISIBLE_DEVICES: all\n      NVIDIA_VISIBLE_DEVICES: all\n```\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "cuda-visible-devices" and top.evidence["gpus_cuda_will_see"] == 0
    assert "NVIDIA_VISIBLE_DEVICES' word" in top.fix and "Delete the CUDA_VISIBLE_DEVICES line" in top.fix


def test_no_device_in_the_job_while_torch_reaches_the_gpu_elsewhere_is_the_jobs_own_setting() -> None:
    """HFGI3D#9: "No CUDA GPUs are available" from one repo's script in WSL2, while a bare python says True: the repo's
    config set cuda_visible_devices (was: no-gpu-visible, "WSL 1")."""
    text = (
        'running python run_pti.py I get "RuntimeError: No CUDA GPUs are available", in WSL2 and in Colab.\n'
        "But CUDA is available (I get True when I run torch.cuda.is_available()). Other repos run fine.\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "cuda-init-failed"
    assert "grep -rni cuda_visible_devices ." in top.fix


def test_a_uv_project_gets_its_fix_through_uv_and_its_pyproject() -> None:
    """lerobot#4093: `uv sync` on Windows installed 2.11.0+cpu; `python -m pip` fails in uv's venv (no pip), and the
    next `uv sync` would put the CPU build back."""
    text = (
        "I ran uv sync and then uv run train.py, but training runs on the CPU.\n"
        "torch: 2.11.0+cpu\n"
        "| NVIDIA-SMI 580.88                 Driver Version: 580.88         CUDA Version: 13.0     |\n"
        "OS: Microsoft Windows 11 Pro\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "cpu-only-build"
    assert "uv pip install torch==2.11.0 --index-url https://download.pytorch.org/whl/cu130" in top.fix
    assert "python -m pip" not in top.fix
    assert '# [tool.uv.sources]\n# torch = { index = "pytorch-cu130" }' in top.fix


def test_a_rocm_builds_no_binary_error_is_amds_arch_with_the_gfx_override() -> None:
    """textgen#5: `hipErrorNoBinaryForGpu: Unable to find code object for all current devices!` on a Radeon; the
    maintainer's HSA_OVERRIDE_GFX_VERSION=10.3.0 fixed it (was: exit 2, no facts found)."""
    text = 'I get "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!" with the ROCm torch\n'
    top = diagnose_text(text).findings[0]
    assert top.code == "arch-not-supported" and "AMD GPU" in top.title and "sm_" not in top.fix
    assert "export HSA_OVERRIDE_GFX_VERSION=10.3.0" in top.fix


def test_mps_refusing_a_macos_above_the_errors_figure_names_the_release_bound() -> None:
    """fastbook#671: "The MPS backend is supported on MacOS 12.3+" while "my macOS is `12.7.6`", torch's version
    unsaid: only a torch of 2.5 or later fails there (was: "the report does not say why", macOS unread)."""
    text = (
        "`RuntimeError: The MPS backend is supported on MacOS 12.3+.Current OS version can be queried using sw_vers`\n"
        "When building the dataloaders I get that error, even though my macOS is `12.7.6`.\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "mps-unavailable" and top.evidence["macos_version"] == "12.7.6"
    assert "torch 2.5 and later need macOS 13.0 or later" in top.title
    assert 'python -m pip install "torch<2.5"' in top.fix


def test_nvidia_smi_seeing_the_gpu_busy_during_the_job_settles_rung_1() -> None:
    """nerfstudio#997: Task Manager showed the GPU at 0%; "with nvidia-smi during training the GPU is at 70% load"
    (was: exit 2, no facts found)."""
    text = (
        "Task Manager shows the NVIDIA GPU at ~0% while training runs, so I thought it was on the CPU.\n"
        "You are right: with nvidia-smi during training the GPU is at 70% load, not 0%.\n"
    )
    diag = diagnose_text(text)
    assert diag.verdict.status == "healthy"
    assert "nvidia-smi" in (parse_environment_text(text).torch.gpu_use_evidence or "")


def test_a_framework_running_on_the_cpu_is_said_and_asks_for_what_settles_it() -> None:
    """decipher#8: whisper's "FP16 is not supported on CPU; using FP32 instead" beside "I have a 3060" was refused as
    "no facts" (exit 2); it shows the job ran on the CPU, which rung 1 cannot yet explain: inconclusive, with the
    command that settles it."""
    text = (
        "I have a 3060, and when I use decipher I get:  UserWarning: FP16 is not supported on CPU; using FP32 instead\n"
    )
    diag = diagnose_text(text)
    assert diag.verdict.status == "inconclusive"
    assert "the job ran on the CPU (FP16 is not supported on CPU; using FP32 instead)" in diag.verdict.summary
    assert "python -m torch.utils.collect_env" in diag.verdict.summary


def test_a_cuda_visible_devices_variable_is_the_shells_not_a_value_that_hides_gpus() -> None:
    text = (
        "CUDA_VISIBLE_DEVICES=$GPU python train.py\n"
        "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |\n"
        ">>> torch.cuda.is_available()\nFalse\n"
    )
    # a variable is not read as a value that names no GPU (its value is the shell's: it may be empty, or an index)
    found = [f for f in diagnose_text(text).findings if f.code == "cuda-visible-devices"]
    assert all("entries_cuda_ignores" not in f.evidence and "neither a GPU index" not in f.title for f in found)


def test_nvidia_smi_busy_without_the_job_named_is_no_evidence_torch_reached_it() -> None:
    text = "nvidia-smi shows the GPU at 30% utilization from the desktop, torch.cuda.is_available() is False\n"
    assert parse_environment_text(text).torch.gpu_use_evidence is None
