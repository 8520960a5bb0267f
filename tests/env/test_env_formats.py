"""The format families of pasted reports (issue #14): each gives its facts, and suggestions are never read as facts.

Each sample has the shape people paste (the machine's lines kept as the tools print them); the assertions name the
facts the parser must take from it, and for the decisive ones the rung-1 cause.
"""

from __future__ import annotations

import pytest

from gputriage.collectors.env_text import parse_environment_text
from gputriage.commands.env import diagnose_text
from gputriage.record.environment import Environment


def parse(text: str) -> Environment:
    return parse_environment_text(text)


def cause(text: str, expect_device: str | None = None) -> tuple[str, str | None]:
    verdict = diagnose_text(text, expect_device).verdict
    return verdict.status, verdict.root_cause


# --- torch's own answers: REPL, IPython, python -c, labelled prints, prose with typos -------------------------------
def test_python_repl_session() -> None:
    env = parse(
        ">>> import torch\n>>> torch.__version__\n'2.1.0+cu121'\n>>> torch.cuda.is_available()\nFalse\n"
        ">>> torch.version.cuda\n'12.1'\n"
    )
    assert (env.torch.version, env.torch.cuda_version, env.torch.is_available) == ("2.1.0+cu121", "12.1", False)


def test_ipython_in_out_prompts() -> None:
    env = parse(
        "In [7]: import torch; torch.__version__\nOut[7]: '2.0.1+cpu'\n\n"
        "In [8]: torch.cuda.is_available()\nOut[8]: False\n"
    )
    assert (env.torch.version, env.torch.is_cpu_build, env.torch.is_available) == ("2.0.1+cpu", True, False)


def test_python_dash_c_prints_several_values_on_one_line() -> None:
    env = parse(
        '$ python -c "import torch; print(torch.__version__, torch.version.cuda)"\n1.13.1+cu117 11.7\n'
        "$ python -c 'import torch; print(torch.cuda.device_count())'\n0\n"
    )
    assert (env.torch.version, env.torch.cuda_version, env.torch.device_count) == ("1.13.1+cu117", "11.7", 0)


def test_labelled_prints_with_a_typo() -> None:
    env = parse("torch version: 2.2.1\ncuda version: None\ncuda available: Flase\nNumber of GPUs: 0\n")
    t = env.torch
    assert (t.version, t.is_cpu_build, t.is_available, t.device_count) == ("2.2.1", True, False, 0)


def test_a_cuda_version_label_with_a_number_is_not_taken_for_the_build() -> None:
    # nvidia-smi -q and people's own notes print "CUDA Version: 12.2" for the driver or the toolkit: not the build.
    env = parse("torch version: 2.2.1+cu121\nCUDA Version: 12.4\ncuda available: False\n")
    assert env.torch.cuda_version == "12.1"  # from the wheel's local version, not the label


def test_prose_answers_with_typos() -> None:
    env = parse("I installed torch 2.0.1 but torch.cuda.is_available() returns Flase on my RTX 3060\n")
    assert env.torch.is_available is False


# --- nvidia-smi in every form ---------------------------------------------------------------------------------------
def test_nvidia_smi_dash_l_with_mig_instances() -> None:
    env = parse(
        "$ nvidia-smi -L\nGPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-0b5c3f1a-1111-2222-3333-444455556666)\n"
        "  MIG 1g.5gb      Device  0: (UUID: MIG-7c1e5f0a-aaaa-bbbb-cccc-ddddeeeeffff)\n"
    )
    assert [d.name for d in env.driver.devices] == ["NVIDIA A100-SXM4-40GB"]


def test_nvidia_smi_dash_q() -> None:
    env = parse(
        "==============NVSMI LOG==============\n\nDriver Version                            : 535.104.05\n"
        "CUDA Version                              : 12.2\n\nAttached GPUs                             : 1\n"
        "GPU 00000000:3B:00.0\n    Product Name                          : Tesla T4\n"
        "    Compute Mode                          : Exclusive_Process\n"
    )
    d = env.driver
    assert (d.driver_version, d.cuda_driver_version) == ("535.104.05", "12.2")
    assert [(g.name, g.compute_mode) for g in d.devices] == [("Tesla T4", "Exclusive_Process")]


def test_nvidia_smi_query_gpu_csv() -> None:
    env = parse(
        "$ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv\n"
        "name, driver_version, memory.total [MiB]\nNVIDIA GeForce RTX 3080, 470.57.02, 10240 MiB\n"
    )
    assert env.driver.driver_version == "470.57.02"
    assert [g.name for g in env.driver.devices] == ["NVIDIA GeForce RTX 3080"]


def test_windows_nvidia_smi_exe_not_found() -> None:
    env = parse(
        "C:\\Users\\me> nvidia-smi.exe\n'nvidia-smi.exe' is not recognized as an internal or external command,\n"
        "operable program or batch file.\n"
    )
    assert env.host.nvidia_smi_missing is True


def test_nvidia_smi_cannot_reach_the_driver_next_to_lspci() -> None:
    text = (
        "$ lspci | grep -i nvidia\n"
        "01:00.0 VGA compatible controller: NVIDIA Corporation GA102 [GeForce RTX 3090] (rev a1)\n"
        "01:00.1 Audio device: NVIDIA Corporation GA102 High Definition Audio Controller (rev a1)\n$ nvidia-smi\n"
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
        "NVIDIA driver is installed and running.\n"
    )
    assert parse(text).host.pci_nvidia_devices == 1  # the HDMI audio function is not a second GPU
    assert cause(text) == ("idle", "driver-not-loaded")


def test_nvml_mismatch_with_the_library_version() -> None:
    text = "$ nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\nNVML library version: 535.183\n"
    assert parse(text).driver.nvml_error == "Driver/library version mismatch"
    assert cause(text) == ("idle", "driver-library-mismatch")


def test_dmesg_nvrm_api_mismatch() -> None:
    text = (
        "[    5.123] NVRM: API mismatch: the client has the version 535.129.03, but\n"
        "[    5.123] NVRM: this kernel module has the version 535.104.05.  Please\n"
    )
    assert cause(text) == ("idle", "driver-library-mismatch")


# --- toolkits and package managers ------------------------------------------------------------------------------------
def test_nvcc_alone_is_the_toolkit_not_the_build_and_is_inconclusive() -> None:
    text = (
        "$ nvcc -V\nnvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2023 NVIDIA Corporation\n"
        "Cuda compilation tools, release 12.3, V12.3.107\n"
    )
    env = parse(text)
    assert (env.host.cuda_toolkit_version, env.torch.cuda_version) == ("12.3", None)
    diag = diagnose_text(text)
    assert diag.verdict.status == "inconclusive"
    assert "collect_env" in diag.verdict.summary


@pytest.mark.parametrize(
    ("text", "version", "cpu", "companions"),
    [
        ("Successfully installed torch-2.1.0+cpu torchvision-0.16.0+cpu\n", "2.1.0+cpu", True, {"torchvision"}),
        (
            "  - Installing torch (2.2.0+cpu)\n  - Installing torchvision (0.17.0+cpu)\n",
            "2.2.0+cpu",
            True,
            {"torchvision"},
        ),
        (
            "Requirement already satisfied: torch in c:\\users\\me\\appdata\\local\\programs\\python\\python311\\lib"
            "\\site-packages (2.1.0)\n",
            "2.1.0",
            True,  # PyPI's Windows wheel is the CPU build
            set(),
        ),
        (
            "# packages in environment at /home/me/miniconda3/envs/dl:\n#\n"
            "# Name                    Version                   Build  Channel\n"
            "cpuonly                   2.0                           0    pytorch\n"
            "pytorch                   2.0.1               py3.10_cpu_0    pytorch\n"
            "torchvision               0.15.2                py310_cpu    pytorch\n",
            "2.0.1",
            True,
            {"torchvision"},
        ),
        (
            "name: dl\nchannels:\n  - pytorch\ndependencies:\n  - python=3.10\n  - pytorch=2.0.1=py3.10_cpu_0\n"
            "  - cpuonly=2.0=0\n",
            "2.0.1",
            True,
            set(),
        ),
        (
            "$ uv pip install torch torchvision\nResolved 12 packages in 1.20s\nInstalled 2 packages in 310ms\n"
            " + torch==2.4.0\n + torchvision==0.19.0\n",
            "2.4.0",
            False,  # PyPI's Linux wheel of 2.4.0 is the CUDA 12.1 build
            {"torchvision"},
        ),
    ],
    ids=["pip-log", "poetry", "pip-already-satisfied-windows", "conda-list", "conda-env-export", "uv"],
)
def test_package_manager_outputs(text: str, version: str, cpu: bool, companions: set[str]) -> None:
    t = parse(text).torch
    assert (t.version, t.is_cpu_build, set(t.companions)) == (version, cpu, companions)


def test_pypi_wheel_on_linux_aarch64_is_the_cpu_build() -> None:
    text = (
        "$ uname -m\naarch64\n$ pip install torch\nSuccessfully installed torch-2.9.1\n"
        "$ nvidia-smi -L\nGPU 0: NVIDIA GB200 (UUID: GPU-0b5c3f1a-1111-2222-3333-444455556666)\n"
    )
    assert parse(text).torch.is_cpu_build is True
    finding = diagnose_text(text).findings[0]
    assert finding.code == "cpu-only-build" and "--index-url https://download.pytorch.org/whl/cu" in finding.fix


def test_lightning_asking_for_a_gpu_index_that_does_not_exist() -> None:
    text = (
        "lightning_fabric.utilities.exceptions.MisconfigurationException: You requested gpu: [1]\n"
        " But your machine only has: [0]\n"
    )
    assert cause(text) == ("idle", "cuda-init-failed")


def test_conda_cpuonly_is_seen() -> None:
    env = parse("cpuonly                   2.0                           0    pytorch\nIs CUDA available: False\n")
    assert env.torch.cpuonly_package is True and env.torch.install_method == "conda"


# --- facts versus suggestions -------------------------------------------------------------------------------------
def test_a_suggested_install_is_not_what_is_installed() -> None:
    env = parse(
        "PyTorch version: 2.1.0+cu121\nIs CUDA available: True\nCUDA used to build PyTorch: 12.1\n\n"
        "Someone replied: try pip install torch==1.10.1+cpu -f https://download.pytorch.org/whl/torch_stable.html\n"
    )
    assert (env.torch.version, env.torch.is_cpu_build, env.torch.install_command) == ("2.1.0+cu121", False, None)


def test_a_quoted_reply_and_a_dockerfile_line_are_not_facts() -> None:
    text = (
        "> you probably have the cpu build, run pip install torch==2.1.0+cpu to check\n"
        "RUN pip install torch==2.1.0 --index-url https://download.pytorch.org/whl/cu121\n"
        ">>> torch.__version__\n'2.1.0+cu121'\n>>> torch.cuda.is_available()\nTrue\n"
    )
    env = parse(text)
    assert (env.torch.version, env.torch.is_cpu_build, env.torch.is_available) == ("2.1.0+cu121", False, True)


# --- containers: docker run, compose, Kubernetes, the toolkit's errors ----------------------------------------------
def test_docker_run_without_gpus_on_a_cuda_image() -> None:
    text = (
        "$ docker run --rm -it pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime python -c "
        '"import torch; print(torch.cuda.is_available())"\nFalse\n'
    )
    env = parse(text)
    assert (env.host.in_container, env.host.container_gpu_requested, env.torch.is_available) == (True, False, False)
    assert cause(text) == ("idle", "container-without-gpu")


def test_compose_file_without_a_gpu_reservation() -> None:
    text = (
        "services:\n  train:\n    image: pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime\n    command: python train.py\n"
        "$ docker compose logs train\ntrain-1  | torch.cuda.is_available(): False\n"
    )
    assert cause(text) == ("idle", "container-without-gpu")


def test_compose_file_with_a_gpu_reservation_is_a_request() -> None:
    env = parse(
        "services:\n  train:\n    image: pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime\n    deploy:\n"
        "      resources:\n        reservations:\n          devices:\n            - driver: nvidia\n"
        "              count: 1\n              capabilities:\n                - gpu\n"
    )
    assert (env.host.in_container, env.host.container_gpu_requested) == (True, True)


def test_kubernetes_pod_without_a_gpu_limit() -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: trainer\nspec:\n  containers:\n  - name: trainer\n"
        '    image: nvcr.io/nvidia/pytorch:24.01-py3\n    resources:\n      limits:\n        cpu: "8"\n'
        "$ kubectl logs trainer\nCUDA available: False\n"
    )
    diag = diagnose_text(text)
    assert diag.verdict.root_cause == "container-without-gpu"
    assert "Kubernetes pod" in diag.findings[0].title
    assert diag.findings[0].fix.startswith("# Kubernetes")


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (
            'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
            "container-without-gpu",
        ),
        (
            "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared "
            "object file: no such file or directory: unknown.",
            "driver-not-loaded",
        ),
        (
            "nvidia-container-cli: initialization error: WSL environment detected but no adapters were found: unknown.",
            "no-gpu-visible",
        ),
        (
            "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update your driver to "
            "a newer version, or use an earlier cuda container: unknown.",
            "driver-too-old",
        ),
    ],
    ids=["no-runtime", "no-host-driver", "wsl-no-adapter", "cuda-requirement"],
)
def test_container_toolkit_errors(error: str, code: str) -> None:
    text = f"$ docker run --rm --gpus all nvidia/cuda:12.4.0-base-ubuntu22.04 nvidia-smi\ndocker: {error}\n"
    assert cause(text) == ("idle", code)


def test_wsl_kernel_is_seen() -> None:
    env = parse(
        "$ uname -a\nLinux DESKTOP 5.15.133.1-microsoft-standard-WSL2 #1 SMP x86_64 GNU/Linux\n"
        '$ python -c "import torch; print(torch.cuda.is_available())"\nFalse\n'
    )
    assert (env.host.wsl, env.torch.is_available) == (True, False)


# --- tracebacks and warnings, in any order ----------------------------------------------------------------------------
def test_a_warning_after_the_answer_still_counts() -> None:
    text = (
        ">>> torch.cuda.is_available()\nFalse\n"
        "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 10010). "
        "Please update your GPU driver\n>>> torch.__version__\n'1.13.1+cu117'\n"
    )
    env = parse(text)
    assert env.driver.cuda_driver_version == "10.1"  # found version 10010 is the driver's CUDA, 10.1
    assert cause(text) == ("idle", "driver-too-old")


def test_out_of_memory_is_named_as_not_the_reason_for_an_idle_gpu() -> None:
    text = (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total "
        "capacity; 6.90 GiB already allocated)\n"
    )
    env = parse(text)
    assert [(e.key, e.finding) for e in env.errors] == [("cuda-oom", None)]
    verdict = diagnose_text(text).verdict
    assert verdict.status != "idle" and verdict.root_cause is None
    assert "not why" in verdict.summary


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("RuntimeError: CUDA error: no kernel image is available for execution on the device\n", "arch-not-supported"),
        ("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable\n", "cuda-init-failed"),
        ("RuntimeError: CUDA error: forward compatibility was attempted on non supported HW\n", "cuda-init-failed"),
        ("RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU\n", None),
        ("RuntimeError: Torch not compiled with CUDA enabled\nPyTorch version: 2.1.0\n", "cpu-only-build"),
        ("RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.\n", "cuda-init-failed"),
        ("RuntimeError: CUDA error: system not yet initialized\n", "cuda-init-failed"),
        (
            "RuntimeError: CUDA unknown error - this may be due to an incorrectly set up environment\n",
            "cuda-init-failed",
        ),
    ],
    ids=["209", "46", "804", "no-driver", "not-compiled", "3", "802", "999"],
)
def test_a_traceback_alone_is_never_healthy(text: str, code: str | None) -> None:
    status, root = cause(text)
    assert status != "healthy"
    if code is not None:
        assert (status, root) == ("idle", code)


def test_a_gpu_name_starts_at_its_product_name_not_at_the_reporters_words() -> None:
    env = parse(
        "Heya, get this error NVIDIA GeForce RTX 5080 with CUDA capability sm_120 is not compatible with the current "
        "PyTorch installation.\n"
    )
    assert [d.name for d in env.driver.devices] == ["NVIDIA GeForce RTX 5080"]


def test_an_intel_laptop_named_in_prose_has_no_nvidia_gpu() -> None:
    env = parse("AssertionError: Torch not compiled with CUDA enabled\n\nMy PC is Intel R lris Xe Graphics ,help me\n")
    assert env.host.other_gpus == ["Intel R lris Xe Graphics"]
