"""`gputriage env --from` on what a twelfth trial of fresh reports found misread. Each text is our own, in the shape
of what people paste."""

from __future__ import annotations

from env_fixtures import top_of_text as _top

from gputriage.collectors.env_text import parse_environment_text
from gputriage.commands.env import diagnose_text

_XPU_REPL = ">>> import torch\n>>> torch.xpu.is_available()\nTrue\n\nIntel Arc A770\n"


def test_torch_answering_true_for_the_intel_gpu_is_healthy() -> None:
    """gpustack#1088: a REPL's `torch.xpu.is_available()` -> True was read as nothing, and the Intel GPU named made
    it IDLE no-gpu-visible with a reinstall of torch (a working XPU build torn down)."""
    env = parse_environment_text(_XPU_REPL)
    assert env.torch.other_accelerators == {"xpu": True} and env.torch.is_available is None
    assert _top(_XPU_REPL)[:2] == ("healthy", "")


def test_collect_envs_xpu_line_and_prose_are_xpus_answers_not_cudas() -> None:
    """torch-xpu-ops#2024: collect_env's "Is XPU available: True" beside "Is CUDA available: False"; and the same
    answer in prose ("`torch.xpu.is_available()` returns `True`") was filed as CUDA's."""
    collect_env = (
        "PyTorch version: 2.8.0+xpu\nIs CUDA available: False\nIs XPU available: True\n"
        "Intel GPU models onboard:\n* Intel(R) Data Center GPU Max 1100\n"
    )
    env = parse_environment_text(collect_env)
    assert env.torch.other_accelerators["xpu"] is True and "Intel Data Center GPU Max 1100" in env.host.other_gpus
    assert _top(collect_env)[0] == "healthy"
    prose = "PyTorch itself detects the XPU (as `torch.xpu.is_available()` returns `True`)."
    env = parse_environment_text(prose)
    assert env.torch.other_accelerators == {"xpu": True} and env.torch.is_available is None


def test_an_xpu_build_without_its_answer_is_inconclusive_with_the_xpu_check() -> None:
    """pytorch#159974: a 2.8.0+xpu collect_env cut short (no XPU line): was IDLE no-gpu-visible with a reinstall
    from the XPU index, the index it already came from."""
    text = "PyTorch version: 2.8.0+xpu\nCUDA used to build PyTorch: None\nIs CUDA available: False\n"
    diagnosis = diagnose_text(text)
    assert diagnosis.verdict.status == "inconclusive"
    assert "torch.xpu.is_available()" in diagnosis.verdict.summary
    assert "pip install" not in " ".join(f.fix for f in diagnosis.findings)


def test_an_xpu_answering_false_is_judged_for_the_intel_gpu() -> None:
    """pytorch#150260: a nightly XPU build answers False; the two nightlies the reporter names (one works, one does
    not) leave which one this is unknown, so the title names neither."""
    text = (
        "Using the latest nightly 2.8.0.dev20250327+xpu build with my Intel Arc A770, I get the following:\n"
        ">>> import torch\n>>> torch.xpu.is_available()\nFalse\n"
        "Using torch 2.8.0.dev20250321+xpu\n"
    )
    status, code, title, fix = _top(text)
    assert (status, code) == ("idle", "driver-not-loaded")
    assert title.startswith("torch answers torch.xpu.is_available() False") and "Intel Arc A770" in title
    assert "clinfo -l" in fix and "nvidia" not in fix.lower()
    cuda_build = ">>> import torch\n>>> torch.__version__\n'2.5.1+cu121'\n>>> torch.xpu.is_available()\nFalse\n"
    status, code, title, _ = _top(cuda_build + "Intel Arc A770\n")
    assert code == "cpu-only-build" and title.startswith("torch 2.5.1+cu121 is not the XPU build")


def test_level_zeros_uninitialised_runtime_is_the_intel_drivers() -> None:
    """intel-extension-for-pytorch#708: PI_ERROR_UNINITIALIZED from torch.xpu.device_count(): was INCONCLUSIVE asking
    for nvidia-smi."""
    text = (
        "2.3.1+cxx11.abi\n2.3.110+xpu\n"
        "RuntimeError: Native API failed. Native API returns: -1102 (PI_ERROR_UNINITIALIZED) -1102 "
        "(PI_ERROR_UNINITIALIZED)\n"
    )
    status, code, title, _ = _top(text)
    assert (status, code) == ("idle", "driver-not-loaded") and "Level Zero" in title


def test_an_apps_own_version_line_is_not_torchs() -> None:
    """BallonsTranslator#825: the app's "Version: 1.4.0" became torch 1.4.0 with CUDA 10.1 and that release's arch
    list as evidence; pip show's "Version:" counts only under "Name: torch"."""
    text = (
        "Python version:  3.10.11 (tags/v3.10.11:7d4cc5a, Apr  5 2023) [MSC v.1929 64 bit (AMD64)]\n"
        "Python executable:  G:\\App\\pylibs_win\\python.exe\nVersion: 1.4.0\n\n"
        "NVIDIA GeForce RTX 5070 Ti with CUDA capability sm_120 is not compatible with the current PyTorch "
        "installation.\n"
    )
    env = parse_environment_text(text)
    assert env.torch.version is None and env.host.os_name == "windows"
    assert env.host.python_command == "G:\\App\\pylibs_win\\python.exe"
    _, code, _, fix = _top(text)
    assert code == "arch-not-supported" and "G:\\App\\pylibs_win\\python.exe -m pip install" in fix
    assert parse_environment_text("Name: torch\nVersion: 2.1.0\n").torch.version == "2.1.0"


def test_a_traceback_path_names_the_bundled_python_the_fix_installs_into() -> None:
    """FramePack#805: torch lives in the one-click package's own Python; a bare `python -m pip` changes another."""
    text = (
        "C:\\Users\\u\\fp\\system\\python\\lib\\site-packages\\torch\\cuda\\__init__.py:235: UserWarning:\n"
        "NVIDIA GeForce RTX 5070 Ti with CUDA capability sm_120 is not compatible with the current PyTorch "
        "installation.\n"
    )
    assert parse_environment_text(text).host.python_command == "C:\\Users\\u\\fp\\system\\python\\python.exe"
    venv = text.replace("system\\python\\lib", ".venv\\Lib")
    assert parse_environment_text(venv).host.python_command == "C:\\Users\\u\\fp\\.venv\\Scripts\\python.exe"
    linux = '  File "/opt/app/env/lib/python3.10/site-packages/torch/cuda/__init__.py", line 1\n'
    assert parse_environment_text(linux + "torch.cuda.is_available() False").host.python_command is None


def test_is_available_false_is_never_said_to_run_through_minor_version_compatibility() -> None:
    """pytorch#68611: a Windows driver 461.72 under a cudatoolkit 11.3 build, is_available() False: was UNDERUSED,
    "it runs through CUDA minor version compatibility", with Linux's minimum."""
    text = (
        "`torch.cuda.is_available() `\nfalse\n"
        "conda install pytorch torchvision torchaudio cudatoolkit=11.3 -c pytorch-nightly\n"
        "| NVIDIA-SMI 461.72       Driver Version: 461.72       CUDA Version: 11.2     |\n"
        "|   0  GeForce GTX 105... WDDM  | 00000000:01:00.0 Off |                  N/A |\n"
    )
    status, code, title, fix = _top(text)
    assert (status, code) == ("idle", "driver-too-old")
    assert "minor version compatibility" not in title and "465.89" in title  # Windows' minimum for CUDA 11.3
    # the other way out is a build the driver runs without that compatibility (cu118 would need it too)
    assert "cu118" not in fix and "+cu102" in fix


def test_a_set_up_lists_xformers_moves_with_torch() -> None:
    """ComfyUI#5281: "- xformers: 0.0.27" in the reporter's list; the fix left it built for the old torch. An RTX
    2070 named in the list needs no Blackwell note."""
    text = "AssertionError: Torch not compiled with CUDA enabled\n- GPU: NVIDIA GeForce RTX 2070\n- xformers: 0.0.27\n"
    assert parse_environment_text(text).torch.companions == {"xformers": "0.0.27"}
    fix = _top(text)[3]
    assert "pip uninstall -y torch xformers" in fix and "pip install xformers --index-url" in fix
    assert "Blackwell" not in fix


def test_a_prose_answer_and_a_cuda_error_by_name_or_number_are_read() -> None:
    """pytorch#167042 ("is showing as False"), cuml#6218 (numba's CUDA_ERROR_NO_DEVICE (100)): both refused as
    holding no facts; huggingface_hub#4128 ("CUDA Error 802" on an H200): was INCONCLUSIVE."""
    assert parse_environment_text("`torch.cuda.is_available()` is showing as False.").torch.is_available is False
    numba = "CudaSupportError: Error at driver init: Call to cuInit results in CUDA_ERROR_NO_DEVICE (100)\n"
    assert [e.key for e in parse_environment_text(numba).errors] == ["cuda-100"]
    # a path into a Windows user's folder through /mnt/c is WSL's mount of it: WSL 2's own error 100 fix follows
    wsl = '  File "/mnt/c/Users/u/proj/.venv/lib/python3.12/site-packages/numba_cuda/driver.py", line 258\n' + numba
    assert parse_environment_text(wsl).host.wsl and "under WSL 2" in _top(wsl)[2]
    fabric = "CUDA Error 802 on H200 HF Jobs. Driver 580.126.09 / CUDA 13.0. Fabric Manager State: In Progress.\n"
    status, code, title, _ = _top(fabric)
    assert (status, code) == ("idle", "cuda-init-failed") and "802" in title and "Fabric Manager" in title


def test_uv_pip_alone_is_a_uv_venv_not_a_project() -> None:
    """pinokio#978: `uv pip install ... --index-url .../whl/cpu` in an app's venv: the fix goes through `uv pip`, and
    adds no pyproject lines (there is none for `uv sync`)."""
    text = (
        "uv pip install torch==2.6.0 torchvision torchaudio --index-url https://download.pytorch.org/whl/cpu\n"
        "AssertionError: Torch not compiled with CUDA enabled\n"
    )
    env = parse_environment_text(text)
    assert env.host.uv_venv and not env.host.uv_project
    fix = _top(text)[3]
    assert "uv pip install torch" in fix and "tool.uv" not in fix
    project = parse_environment_text(text + "uv sync\n")
    assert project.host.uv_project and not project.host.uv_venv


def test_an_nvidia_gpu_torch_does_not_reach_is_the_subject_whatever_xpu_answers() -> None:
    """A re-judge: an XPU wheel on a laptop with Intel graphics beside its RTX answers "Is XPU available: True"; the
    report is about the NVIDIA GPU torch does not reach (it read HEALTHY)."""
    text = (
        "PyTorch version: 2.8.0+xpu\nCUDA used to build PyTorch: None\nIs CUDA available: False\n"
        "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 4070 Laptop GPU\n"
        "Nvidia driver version: 560.94\nIs XPU available: True\n"
    )
    status, code, title, _ = _top(text)
    assert (status, code) == ("idle", "cpu-only-build") and "RTX 4070" in title
