"""`gputriage env --from` on what a tenth trial of 30 fresh reports found misread: working environments on a driver
below their CUDA's minimum (minor version compatibility), a bug template's expected output, an issue form's OS field,
nvidia-smi working in a container whose torch sees no GPU, error 304, ROCm fixes without a pin, torch.compile's
toolchain errors, a GPU load stated in prose, and WSL's kernels. Each text is our own, in the shape of what people
paste."""

from __future__ import annotations

from gputriage.collectors.env_text import parse_environment_text
from gputriage.commands.env import diagnose_text


def _top(text: str) -> tuple[str, str, str]:
    diagnosis = diagnose_text(text)
    found = [f for f in diagnosis.findings if f.severity.value != "info"]
    return diagnosis.verdict.status, found[0].code if found else "", found[0].fix if found else ""


def _collect_env(torch: str, cuda: str, gpu: str, driver: str, available: str = "True") -> str:
    return (
        f"PyTorch version: {torch}\nIs debug build: False\nCUDA used to build PyTorch: {cuda}\n"
        "OS: Ubuntu 20.04.6 LTS (x86_64)\nPython version: 3.10.12 (64-bit runtime)\n"
        f"Is CUDA available: {available}\nGPU models and configuration: GPU 0: {gpu}\n"
        f"Nvidia driver version: {driver}\n"
    )


def test_a_working_build_on_a_driver_below_its_minimum_is_healthy_through_minor_compatibility() -> None:
    """pyg#8418 and pytorch#95445: a T4 on 510 with cu118, an A100 on 450 with cu117, both available: they were
    UNDERUSED, and told to reinstall the build they had."""
    for text in (
        _collect_env("2.1.0+cu118", "11.8", "Tesla T4", "510.47.03"),
        _collect_env("2.0.0.dev20230223+cu117", "11.7", "NVIDIA A100-SXM4-40GB", "450.191.01"),
    ):
        diagnosis = diagnose_text(text)
        assert diagnosis.verdict.status == "healthy"
        (finding,) = [f for f in diagnosis.findings if f.code == "driver-too-old"]
        assert finding.severity.value == "info"
        assert "minor version compatibility" in finding.title and "nothing needs PTX JIT" in finding.title
        assert "nothing to change" in finding.fix and "pip install" not in finding.fix


def test_below_the_minimum_without_kernels_for_the_gpu_stays_a_warning() -> None:
    """The same driver gap where the build has no cubin for the GPU (a Kepler K80, sm_37, on 2.1 cu121): its kernels
    would need PTX JIT, which the older driver cannot do."""
    text = _collect_env("2.1.0+cu121", "12.1", "Tesla K80", "525.60.13")
    assert _top(text)[1] in ("driver-too-old", "arch-not-supported")
    assert diagnose_text(text).verdict.status != "healthy"


def test_a_bug_templates_expected_output_is_no_fact() -> None:
    """pytorch#40618: "## Expected behavior" with "False / 0" under it, and "gives the expected out:" before the output
    of a command that hid the GPUs on purpose, made a working machine's CUDA_VISIBLE_DEVICES the cause."""
    text = (
        "```\nCUDA_VISIBLE_DEVICES=1 python3.7 -c \"import torch; import os; os.environ['CUDA_VISIBLE_DEVICES']=''; "
        'print(torch.cuda.is_available()); print(torch.cuda.device_count())"\n```\n\n'
        "gives the expected out:\n\n> False\n> 0\n\n"
        "## Expected behavior\n\nThe expected output should be:\n\n> True\n> 1\n> False\n> 0\n\n"
        "## Environment\n\n" + _collect_env("1.4.0", "10.1", "GeForce RTX 2080 Ti", "440.82", "Yes")
    )
    assert diagnose_text(text).verdict.status == "healthy"
    assert parse_environment_text(text).torch.is_available is True


def test_an_issue_forms_os_field_wins_over_a_joke_in_prose() -> None:
    """InvokeAI#7520: "### Operating system / Linux", and "I am not using Windows 7, it's a theme" later: the fix was
    torch-directml."""
    text = (
        "### Operating system\n\nLinux\n\n### GPU vendor\n\nAMD (ROCm)\n\n### GPU model\n\nRX 6800\n\n"
        '"torch": "2.4.1+cu121"\n\nAnd no I am not using Windows 7, it is a very convincing theme.\n'
    )
    assert parse_environment_text(text).host.os_name == "linux"
    _, code, fix = _top(text)
    assert code == "no-gpu-visible"
    assert "torch-directml" not in fix
    assert "torch==2.4.1 torchvision torchaudio --index-url https://download.pytorch.org/whl/rocm6.1" in fix
    field = "- OS: Windows 11\ntorch 2.4.1+cu121\nI run Linux servers at work too.\n"
    assert parse_environment_text(field).host.os_name == "windows"


def test_nvidia_smi_working_in_a_container_names_the_missing_cuda_library() -> None:
    """stable-diffusion-webui-docker#348: "I have good nvidia-smi in the docker container" and is_available() False
    was "started without access to the GPU: docker run --gpus all"; the compose file lacked the compute capability."""
    text = (
        "I have good nvidia-smi in the docker container. But get this error.\n"
        ">>> import torch\n>>> torch.cuda.is_available()\nFalse\n"
    )
    _, code, fix = _top(text)
    assert code == "container-without-gpu"
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in fix
    title = next(f.title for f in diagnose_text(text).findings if f.code == code)
    assert "has the GPU but not its CUDA library" in title
    negated = text.replace("I have good nvidia-smi", "nvidia-smi does not work")
    assert not parse_environment_text(negated).host.nvidia_smi_works_stated


def test_error_304_is_an_operating_system_call_refused_not_a_stuck_driver() -> None:
    """gramine examples#97: True on the machine, False inside an SGX enclave, "Error 304: OS call failed"."""
    text = (
        "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Error 304: OS call failed or "
        "operation not supported on this OS (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:109.)\nFalse\n"
    )
    finding = next(f for f in diagnose_text(text).findings if f.code == "cuda-init-failed")
    assert "cudaErrorOperatingSystem" in finding.title and "sandbox" in finding.title
    assert "reboot" not in finding.fix and "ls -l /dev/nvidia*" in finding.fix


def test_a_rocm_fix_keeps_a_python_the_newest_wheels_lack() -> None:
    """easydiffusion#1607: Python 3.8 on an AMD GPU; the newest ROCm index has no wheel for it."""
    text = (
        "Python 3.8.10 (default, Nov 22 2023)\n>>> import torch\n>>> torch.cuda.is_available()\nFalse\n"
        "My GPU is an AMD Radeon RX 6800 XT on Ubuntu\n"
    )
    fix = _top(text)[2]
    assert "--index-url https://download.pytorch.org/whl/rocm6.1" in fix and "torch==2.4.*" in fix


def test_torch_compiles_toolchain_errors_are_not_rung_one_causes() -> None:
    """pytorch#94585 and pytorch-cpu-feedstock#317: eager ran on the GPU, torch.compile failed to link libcuda or to
    find cuda.h. They were refused."""
    for line, fix in (
        ("/usr/bin/ld: cannot find -lcuda\ncollect2: error: ld returned 1 exit status\n", "TRITON_LIBCUDA_PATH"),
        ("/tmp/tmpx/main.c:1:10: fatal error: cuda.h: No such file or directory\n", "cuda-cudart-dev"),
    ):
        diagnosis = diagnose_text("This code runs normally on the gpu without compile.\n" + line)
        assert diagnosis.verdict.status == "healthy"
        assert "Not a rung-1 cause" in diagnosis.verdict.summary
        from gputriage.data.error_signatures import signature

        keys = [e.key for e in parse_environment_text(line).errors]
        assert any(fix in (signature(k).fix if signature(k) else "") for k in keys)


def test_a_gpu_load_said_in_prose_shows_torch_reached_it() -> None:
    """ultralytics#7272: "torch 2.1.1+cu118 ... GPU is working only %8-9": rung 1 is fine, the load is rung 5's."""
    text = "I use torch version 2.1.1+cu118. While training, GPU is working only %8-9. It trains very fast.\n"
    assert parse_environment_text(text).torch.gpu_use_evidence is not None
    assert diagnose_text(text).verdict.status == "healthy"
    assert parse_environment_text("torch 2.1.1+cu118, GPU usage is 0% while training\n").torch.gpu_use_evidence is None


def test_wsl_kernels_old_and_first() -> None:
    """WSL#8174: kernel 5.10.16.3 with error 35 was "driver too old, pip install"; WSL#6122: the WSL 1 kernel
    4.4.0-20236-Microsoft was refused."""
    old = (
        "WSL version 2\nKernel version: Linux version 5.10.16.3-microsoft-standard-WSL2\n"
        "./deviceQuery\ncudaGetDeviceCount returned 35\n"
        "-> CUDA driver version is insufficient for CUDA runtime version\n"
    )
    _, code, fix = _top(old)
    assert code == "driver-too-old" and "wsl --update" in fix and "pip install" not in fix
    first = "Linux version 4.4.0-20236-Microsoft (Microsoft@Microsoft.com) (gcc version 5.4.0 (GCC) ) #1000\n"
    _, code, fix = _top(first)
    assert code == "no-gpu-visible" and "wsl --set-version" in fix


def test_a_fix_to_a_release_before_local_version_tags_uses_its_cuda_page() -> None:
    """lhotse#793: a CUDA 9.1 driver was told `torch==1.1.0+cu90 -f torch_stable.html`, which matches nothing: 1.1.0's
    wheels carry no +cu90 (cu90/torch-1.1.0-...), and live on the cu90 page."""
    from gputriage.rules.env_facts import pip_install

    assert pip_install("1.1.0", "9.0", ["torchvision"]) == (
        "python -m pip install torch==1.1.0 torchvision==0.3.0 -f https://download.pytorch.org/whl/cu90/torch_stable.html"
    )
    assert "torch==1.4.0+cu92" in pip_install("1.4.0", "9.2")


def test_a_suggested_command_fenced_on_one_line_is_no_fact() -> None:
    """Direct3D-S2#32: "The fix is to install ... through the following command:" then "```pip3 install ...
    /whl/nightly/cu128```" on one line: its cu128 was read as the installed build's CUDA (and a one-line fence flipped
    the fence state for the rest of the text)."""
    text = (
        "```NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
        "installation.\nThe current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 "
        "sm_90.\n```\n\nThe fix is to install a compatible CUDA version for the 5090 through the following command:\n\n"
        "```pip3 install --pre torch torchvision torchaudio --index-url https://download.pytorch.org/whl/nightly/cu128```"
        "\n"
    )
    env = parse_environment_text(text)
    assert env.torch.cuda_version is None and env.torch.install_command is None
    assert _top(text)[1] == "arch-not-supported"
