"""`gputriage env --from` on what a third user trial of 30 fresh reports (stop 37) found misread: an AMD GPU behind a
CUDA build in a container, WSL 1 shown by its kernel, a Hyper-V guest, a WSL question taken for a fact, and errors
quoted inside a reporter's sentence. Texts are our own, in the shape people paste."""

from __future__ import annotations

from gputriage.collectors.env_text import parse_environment_text
from gputriage.commands.env import diagnose_text

_AMD_IN_CONTAINER = (
    "Since the new image the container crash-loops on my AMD APU (gfx1150, Radeon 890M). The traceback ends in "
    "torch.cuda.current_device(), which raises `RuntimeError: Found no NVIDIA driver on your system` - odd on an AMD "
    "box. Inside the docker container torch is `2.12.0+cu130` and torch.version.hip is None.\n"
)


def test_an_amd_gpu_behind_a_cuda_build_gets_the_rocm_build_not_a_docker_gpu_flag() -> None:
    diag = diagnose_text(_AMD_IN_CONTAINER)

    f = diag.findings[0]
    assert diag.verdict.root_cause == "no-gpu-visible"
    assert "AMD one (gfx1150)" in f.title
    assert "torch 2.12.0+cu130 is a CUDA build, for NVIDIA GPUs only" in f.fix
    assert "--index-url https://download.pytorch.org/whl/rocm" in f.fix
    assert "--gpus" not in f.fix
    # the error is quoted as the error, not as the reporter's sentence around it
    assert f.evidence["error"] == "RuntimeError: Found no NVIDIA driver on your system"


def test_wsl_1_is_read_from_its_kernel_and_gets_the_conversion_to_wsl_2() -> None:
    text = (
        "Following the CUDA on WSL guide (I thought this was wsl2):\n"
        "Error! Your kernel headers for kernel 4.4.0-19041-Microsoft cannot be found.\n"
        "$ nvidia-smi\n"
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    )

    env = parse_environment_text(text)
    f = diagnose_text(text).findings[0]

    assert (env.host.wsl, env.host.wsl_version) == (True, 1)
    assert "WSL 1" in f.title
    assert "wsl --set-version <distro> 2" in f.fix
    assert "run on a machine" not in f.fix


def test_a_hyper_v_guest_is_named_by_its_display_and_a_wsl_question_is_not_a_fact() -> None:
    text = (
        "# Is WSL supported?\n\nIs it possible to run in WSL?\n\n"
        "My PC has an RTX 4090 but the Ubuntu virtual machine does not see it:\n"
        "`RuntimeError: Found no NVIDIA driver on your system`\n\n"
        "sudo lshw -C display\n  *-graphics\n       product: hyperv_drmdrmfb\n       logical name: /dev/fb0\n"
    )

    env = parse_environment_text(text)
    f = diagnose_text(text).findings[0]

    assert env.host.wsl is None
    assert env.host.virtual_machine == "Hyper-V"
    assert "Hyper-V virtual machine" in f.title
    assert "passes it through" in f.fix


def test_an_nvml_error_quoted_in_prose_ends_with_its_quote() -> None:
    text = "nvidia-smi 报错 `Failed to initialize NVML: Driver/library version mismatch`，网上说重启即可解决。\n"

    assert parse_environment_text(text).driver.nvml_error == "Driver/library version mismatch"


def test_a_reporters_words_after_a_reply_marker_are_facts_and_gpu_memory_held_means_torch_reached_the_gpu() -> None:
    text = (
        "# Zero GPU-Util\n\nnvidia-smi shows the GPU-Util is 0 while training.\n\n"
        "--- reporter ---\nMaybe it is the dataloader: one sample takes 30 s to load.\n\n"
        "--- reporter ---\nNo error. Most of the time GPU-Util is 0 (the gpu memory is indeed allocated), so it's "
        "slow.\n"
    )

    diag = diagnose_text(text)

    assert parse_environment_text(text).torch.gpu_use_evidence is not None
    assert diag.verdict.root_cause is None  # rung 1 is not why the GPU idles
    assert "gputriage run" in diag.verdict.summary


def test_a_chinese_report_that_is_available_returns_true_is_read() -> None:
    text = "安装了GPU版本的Pytorch，并且torch.cuda.is_available()返回为True，但GPU使用率一直为0\n"

    assert parse_environment_text(text).torch.is_available is True


def test_pip_reinstalling_torch_as_a_dependency_on_windows_is_the_cpu_build() -> None:
    names = ", ".join(f"pkg{i}" for i in range(300))  # pip's line runs to thousands of characters
    text = (
        "Installing careamics made CUDA unavailable.\n"
        "(careamics) C:\\Users\\me>pip install careamics\n"
        f"Installing collected packages: {names}, torch, tqdm\n"
    )

    env = parse_environment_text(text)
    diag = diagnose_text(text)

    assert env.torch.is_cpu_build is True
    assert "Installing collected packages: ... torch" in (env.torch.cpu_build_evidence or "")
    assert diag.verdict.root_cause == "cpu-only-build"


def test_with_the_driver_and_gpu_unknown_the_build_needs_the_oldest_driver_and_blackwell_is_named() -> None:
    fix = diagnose_text("torch.__version__ is 2.13.0+cpu and torch.cuda.is_available() returns False\n").findings[0].fix

    assert "--index-url https://download.pytorch.org/whl/cu126" in fix
    assert "Blackwell) needs the CUDA 12.9 build" in fix


def test_a_gtx_3090_is_the_rtx_3090_and_a_pip_wheel_gets_its_own_releases_pip_build() -> None:
    text = (
        'I get "RuntimeError: CUDA error: no kernel image is available for execution on the device".\n'
        "Here is my environment:\nGTX 3090\ntorch==1.8.1+cu101\ntorchvision==0.9.1+cu101\n"
    )
    f = diagnose_text(text).findings[0]

    assert f.code == "arch-not-supported" and f.evidence["compute_capability"] == "8.6"
    assert "torch==1.8.1+cu111 torchvision==0.9.1+cu111" in f.fix and "conda install" not in f.fix


def test_the_driver_cuda_quoted_from_nvidia_smi_in_prose_bounds_the_build_for_an_unnamed_gpu() -> None:
    text = (
        "Hit the same error: no kernel image is available for execution on the device. Running `nvidia-smi` I noticed "
        "it had `CUDA Version 11.4` listed, but torch.__version__ is `1.12.0+cu102`.\n"
    )
    env = parse_environment_text(text)
    fix = diagnose_text(text).findings[0].fix

    assert env.driver.cuda_driver_version == "11.4"
    assert "torch==1.12.0+cu113" in fix  # the newest CUDA build of 1.12 that a CUDA 11.4 driver runs
    assert "the newest release" not in fix


def test_no_kernel_image_on_a_jetson_gets_nvidias_jetpack_wheel() -> None:
    text = (
        "# Error `RuntimeError: CUDA error: no kernel image is available for execution on the device` on Jetson orin "
        "agx.\nI installed the aarch64 nightly from download.pytorch.org. JetPack 6.2.\n"
    )
    f = diagnose_text(text).findings[0]

    assert f.code == "arch-not-supported" and f.evidence["compute_capability"] == "8.7"
    assert "NVIDIA's torch built for JetPack 6.2" in f.fix
    assert "the newest release" not in f.fix


def test_a_driver_too_old_on_colab_is_not_told_to_upgrade_the_driver() -> None:
    text = (
        "On colab.research.google.com after pip install torch==1.8.0:\n"
        "RuntimeError: The NVIDIA driver on your system is too old (found version 10010).\n"
    )
    fix = diagnose_text(text).findings[0].fix

    assert "cannot be upgraded" in fix and "upgrade the NVIDIA driver to" not in fix
    assert "put ! before each command" in fix


def test_the_fix_installs_into_the_python_the_job_runs_with() -> None:
    # ComfyUI portable runs its own `.\python_embeded\python.exe`: `python -m pip` would install into another Python
    text = (
        "C:\\ComfyUI_windows_portable>.\\python_embeded\\python.exe -s ComfyUI\\main.py --windows-standalone-build\n"
        "torch 2.13.0+cpu\n"
        "AssertionError: Torch not compiled with CUDA enabled\n"
    )
    env = parse_environment_text(text)
    fix = diagnose_text(text).findings[0].fix

    assert env.host.python_command == ".\\python_embeded\\python.exe"
    assert ".\\python_embeded\\python.exe -m pip install torch" in fix
    assert not any(line.startswith("python ") for line in fix.splitlines())
