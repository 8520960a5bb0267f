"""`gputriage env --from` on what a sixth trial of 30 fresh reports found misread (stop 40): an answer said in the
reporter's own words (on the next line, after a comma, after CJK words), a Jetson's False with no version, GPU names
in prose (GeForce GT/MX lines, "GPU A10", "AMD6500XT"), the web UI's "Torch is not able to use GPU", a ROCm container
and a machine whose only GPU is Intel's. Each text is our own, in the shape of what people paste."""

from __future__ import annotations

import pytest

from gputriage.collectors.env_text import parse_environment_text
from gputriage.commands.env import diagnose_text


@pytest.mark.parametrize(
    "text",
    [
        "when running\n   torch.cuda.is_available()\ni get false\n",  # pytorch#67997: the answer on the next line
        "I installed torch on my jetson nano,but cuda.is_available() returns false\n",  # after a comma, no space
        "本地win10机器，安装好后，torch.cuda.is_available() 就是False\n",  # CJK words before the value
        "torch.cuda.is_available()发现是False\n",
    ],
)
def test_the_answer_said_in_the_reporters_words_is_read(text: str) -> None:
    assert parse_environment_text(text).torch.is_available is False


def test_a_working_machine_beside_a_failing_one_is_not_healthy() -> None:
    """yolov10#218: the T4 server answers True, the Windows 10 machine False (was: HEALTHY, the working one judged)."""
    text = (
        "T4卡的服务器，直接按安装流程，torch.cuda.is_available() 为True。\n"
        "后来我本地win10机器，本来就有cuda12.2，同样方法安装好后，torch.cuda.is_available() 就是False。\n"
    )
    assert diagnose_text(text).verdict.status != "healthy"


def test_a_jetson_whose_torch_answers_false_needs_the_jetpack_wheel_even_with_no_version() -> None:
    """Lmy0217/PyTorch-aarch64#3 (was: inconclusive, "the report does not say the CUDA of the torch build")."""
    text = (
        "I successfully install the torch on my jetson nano(Jetpack 4.4 [L4T 32.4.3]),"
        "but cuda.is_available() returns false\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "cpu-only-build"
    assert "jp/v44/pytorch/" in top.fix


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("When I finetune on GPU A10(only one gpu), the gpu utility is very low\n", "GPU A10"),
        ("Volatile GPU-Util less than 10% in my windows PC, with NVIDIA GeForce 2080Ti.\n", "NVIDIA GeForce 2080Ti"),
    ],
)
def test_a_gpu_named_in_prose_is_a_fact_not_a_refusal(text: str, named: str) -> None:
    """(was: exit 2, "found no PyTorch, CUDA or nvidia-smi facts")."""
    assert parse_environment_text(text).host.gpus_named == [named]
    assert diagnose_text(text).verdict.status == "inconclusive"


def test_the_web_uis_torch_cannot_use_gpu_on_an_amd_windows_machine_gets_directml() -> None:
    """lshqqytiger/stable-diffusion-webui-amdgpu#416 (was: exit 2)."""
    text = (
        "[Bug]: Windows10 + AMD6500XT failed to use SD\n"
        "RuntimeError: Torch is not able to use GPU; add --skip-torch-cuda-test to COMMANDLINE_ARGS variable to "
        "disable this check\n"
    )
    env = parse_environment_text(text)
    assert env.torch.is_available is False
    top = diagnose_text(text).findings[0]
    assert top.code == "no-gpu-visible"
    assert "torch-directml" in top.fix


def test_a_rocm_container_is_never_told_to_install_nvidias_container_toolkit() -> None:
    """ROCm/legacy-rocm-build#1756: `--device=/dev/kfd --device=/dev/dri` and hipErrorNoBinaryForGpu (was: root cause
    container-without-gpu, with `docker run --gpus all`)."""
    text = (
        "docker run -it --device=/dev/kfd --device=/dev/dri --group-add video rocm/pytorch:latest\n"
        "I am inside the docker container and run python3 -c 'import torch; torch.rand(2).cuda()'\n"
        '"hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"\nAborted (core dumped)\n'
        "GPU: AMD Radeon RX 6700S\n"
    )
    codes = [f.code for f in diagnose_text(text).findings]
    assert "container-without-gpu" not in codes
    assert codes[0] == "arch-not-supported"


def test_a_machine_whose_only_gpu_is_intels_gets_the_xpu_build_not_nvidias_toolkit() -> None:
    """ai-dock/comfyui#79: "fails due to no Nvidia GPU", "an Intel GPU" (was: container-without-gpu)."""
    text = (
        "How do I get this working with an Intel GPU?\n"
        "I got the docker container up and running but it fails due to no Nvidia GPU:\n"
        "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed "
        "a driver from http://www.nvidia.com/Download/index.aspx\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "no-gpu-visible"
    assert "download.pytorch.org/whl/xpu" in top.fix and "docker run --gpus" not in top.fix


def test_a_module_the_kernel_refuses_for_its_key_is_secure_boots_and_modprobe_is_not_the_fix() -> None:
    """canonical/nvidia-graphics-drivers#62: "Key was rejected by service" (was: `sudo modprobe nvidia` first, the
    command the user had just shown failing)."""
    text = (
        "$ nvidia-smi\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
        "the latest NVIDIA driver is installed and running.\n"
        "$ sudo modprobe nvidia\nmodprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "driver-not-loaded" and top.evidence["secure_boot"] is True
    assert top.fix.splitlines()[2].startswith("sudo mokutil --import")
    assert not top.fix.startswith("sudo modprobe")


_A100_MIG_TABLE = """\
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA A100 80GB PCIe          Off |   00000000:31:00.0 Off |                   On |
| N/A   34C    P0             43W /  300W |      53MiB /  81920MiB |     N/A      Default |
|                                         |                        |              Enabled |
+-----------------------------------------+------------------------+----------------------+
"""


def test_the_num_gpus_assertion_with_mig_on_is_mig_not_an_index_the_code_asks_for() -> None:
    """pytorch#131650 (was: "the code asks for a GPU index it does not have", use an index below the count)."""
    text = "RuntimeError: device >= 0 && device < num_gpus INTERNAL ASSERT FAILED\n" + _A100_MIG_TABLE
    assert [d.mig_mode for d in parse_environment_text(text).driver.devices] == [True]
    top = diagnose_text(text).findings[0]
    assert top.code == "cuda-init-failed" and top.evidence["mig_enabled_gpus"] == [0]
    assert "export CUDA_VISIBLE_DEVICES=MIG-<uuid>" in top.fix


def test_a_setting_that_worked_beside_one_that_failed_is_not_judged() -> None:
    """vllm#327: `export CUDA_VISIBLE_DEVICES=0` works, `0,1,2,3` fails (was: "CUDA_VISIBLE_DEVICES='0' hides the
    GPUs", the working value blamed)."""
    text = (
        "torch.cuda.DeferredCudaCallError: CUDA call failed lazily at initialization with error: device >= 0 && "
        "device < num_gpus INTERNAL ASSERT FAILED\n"
        "If I explicitly set the visible device to just device:0, via:\n```\nexport CUDA_VISIBLE_DEVICES=0\n```\n"
        "then the installation worked fine.\n"
        "However, when I switched back to the default (`export CUDA_VISIBLE_DEVICES=0,1,2,3`), the error occurred.\n"
    )
    assert "CUDA_VISIBLE_DEVICES" not in parse_environment_text(text).env_vars
    assert [f.code for f in diagnose_text(text).findings][:1] == ["cuda-init-failed"]


def test_a_list_of_devices_is_read_whole() -> None:
    assert parse_environment_text("$ export CUDA_VISIBLE_DEVICES=0,1\n").env_vars["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_a_text_with_classic_mac_line_endings_is_read_line_by_line() -> None:
    """A trial: CR-only line endings gave exit 2, "found no ... facts"."""
    text = "PyTorch version: 1.8.1+cpu\rIs CUDA available: False\rCUDA used to build PyTorch: None\r"
    env = parse_environment_text(text)
    assert env.torch.version == "1.8.1+cpu" and env.torch.is_available is False


def test_facts_past_the_line_limit_are_said_to_be_past_it() -> None:
    from gputriage.collectors.env_text.limits import MAX_LINES
    from gputriage.errors import InputError

    text = "filler\n" * MAX_LINES + "PyTorch version: 2.1.0+cu121\n"
    with pytest.raises(InputError, match=f"only its first {MAX_LINES:,} lines are read"):
        parse_environment_text(text)


def test_the_reporter_saying_it_got_the_cpu_version_is_a_cpu_build_and_their_workaround_is_not_the_install() -> None:
    """kyutai-labs/delayed-streams-modeling#131 (was: inconclusive, the workaround's torch==2.5.1+cu124 read as the
    torch installed)."""
    text = (
        "When trying to directly use `uvx --with moshi`, the wrong pytorch version is installed. It defaults to the "
        "[cpu] version even when having cuda installed. Windows.\n\n"
        "The quick-fix, is to also specify the pytorch version by appending the specific version.\n\n"
        "`uvx --with moshi --with torch==2.5.1+cu124 --index-url https://download.pytorch.org/whl/cu124 python x.py`\n"
    )
    env = parse_environment_text(text)
    assert env.torch.is_cpu_build is True and env.torch.cuda_version is None
    assert diagnose_text(text).findings[0].code == "cpu-only-build"


def test_condas_solver_line_names_the_build_and_the_python() -> None:
    """pytorch#67108: "pytorch/win-64::pytorch-1.10.0-py3.8_cpu_0" (was: no version, no Python, and a cu126 pip
    command that has no wheel for Python 3.8)."""
    text = (
        "conda install cpu version instead of expected cuda version on Windows\n"
        "1. Run `conda install pytorch torchvision torchaudio cudatoolkit=11.3 -c pytorch` on Windows\n"
        "2. The output is\n    The following NEW packages will be INSTALLED:\n```\n"
        "    pytorch            pytorch/win-64::pytorch-1.10.0-py3.8_cpu_0\n"
        "    torchvision        pytorch/win-64::torchvision-0.11.1-py38_cpu\n```\n"
    )
    env = parse_environment_text(text)
    assert (env.torch.version, env.torch.install_method, env.host.python_version) == ("1.10.0", "conda", "3.8")
    assert env.torch.is_cpu_build is True
    top = diagnose_text(text).findings[0]
    assert top.code == "cpu-only-build" and "torch==1.10.0+cu" in top.fix and "cu126" not in top.fix


def test_a_wheel_that_could_not_be_fetched_is_not_the_torch_installed() -> None:
    """pinokio#1027: a JetPack wheel URL that returned 404 was read as the installed torch, and the headline called
    NVIDIA's CUDA wheel CPU-only."""
    text = (
        "Jetson AGX Orin, JetPack 5.1.2. Official NVIDIA wheel links are returning `HTTP 404 Not Found`.\n"
        "* *Failed URL:* `https://developer.download.nvidia.com/compute/redist/jp/v512/pytorch/"
        "torch-2.1.0a0+41361538.nv23.06-cp310-cp310-linux_aarch64.whl`\n"
        "`pip install torch` installs a CPU-only version; torch.cuda.is_available() returns False\n"
    )
    env = parse_environment_text(text)
    assert env.torch.version != "2.1.0a0+41361538.nv23.06"
    assert diagnose_text(text).findings[0].code == "cpu-only-build"


def test_two_halves_of_the_driver_from_different_releases_are_not_fixed_by_a_reboot() -> None:
    """tinygrad/open-gpu-kernel-modules#47: the .run's user space (570.124.04) and a module built apart (570.124.06),
    a reboot done (was: "sudo reboot")."""
    text = (
        "bash ./NVIDIA-Linux-x86_64-570.124.04.run --no-kernel-modules\n"
        "cd /data/open-gpu-kernel-modules-570.124.06-p2p/\n./install.sh\nreboot\n\n"
        "nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.124\n"
    )
    top = diagnose_text(text).findings[0]
    assert top.code == "driver-library-mismatch"
    assert "NVIDIA-Linux-x86_64-570.124.06.run --no-kernel-modules" in top.fix and "sudo reboot" not in top.fix
    plain = "nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\n"
    assert diagnose_text(plain).findings[0].fix.startswith("sudo reboot")


def test_a_gpu_named_in_prose_that_no_recent_build_supports_is_arch_not_supported() -> None:
    """pytorch#14681: "GPU is GeForce GT 740M | 3.0" (was: exit 2, no facts): a Kepler sm_30, whose kernels no
    PyTorch build after 1.3 has; the fix is that build (or the CPU)."""
    text = "GPU is GeForce GT 740M | 3.0\nI can use pytorch just with CPU features\n"
    assert parse_environment_text(text).host.gpus_named == ["GeForce GT 740M"]
    top = diagnose_text(text).findings[0]
    assert top.code == "arch-not-supported" and top.evidence["compute_capability"] == "3.0"
    assert "pytorch==1.3.0" in top.fix
