"""Rung-1 facts: the torch build, the driver and GPUs, the host, the env vars. Filled by a probe or a pasted text."""

from __future__ import annotations

import msgspec


class TorchFacts(msgspec.Struct):
    installed: bool | None = None  # None: the pasted text does not say
    version: str | None = None
    cuda_version: str | None = None  # torch.version.cuda: the CUDA runtime torch was built with
    hip_version: str | None = None
    is_cpu_build: bool | None = None
    install_method: str | None = None  # pip | conda | source | unknown
    is_available: bool | None = None
    device_count: int | None = None
    arch_list: list[str] | None = None
    init_warning: str | None = None  # the warning/error text of CUDA initialisation, captured
    import_error: str | None = None
    init_error_code: int | None = None  # the CUDA error number named in init_warning (804, 999, ...)
    min_capability: str | None = None  # "The minimum cuda capability supported by this library is 3.7"
    cuda_version_inferred_from: str | None = None  # set when cuda_version was not read but looked up (a pip command)
    cpuonly_package: bool | None = None  # conda's `cpuonly` package, which pins every later solve to CPU builds
    install_command: str | None = None  # the install command seen in a pasted text
    # A pip log shows pip (re)installing torch, often as another package's dependency; its version not shown.
    pip_installed_torch: str | None = None
    other_accelerators: dict[str, bool] = msgspec.field(default_factory=dict)  # mps / xpu -> available
    mps_built: bool | None = None  # torch.backends.mps.is_built(): the build has Apple's GPU backend
    # A pasted report names MPS (torch.backends.mps, "MPS", device="mps") without an answer from it: on a Mac, the
    # job is meant for Apple's GPU
    mps_named: bool | None = None
    # The minimum macOS that MPS's own error names ("The MPS backend is supported on MacOS 12.3+"), as it said it:
    # some releases' error understates what the release needs (pytorch#139425).
    mps_error_min_macos: str | None = None
    # Another library that initialised the device before torch in the same process (cupy, ...), when shown.
    init_conflict: str | None = None
    probe_mode: str | None = None  # subprocess | in-process | text
    # The text that shows the build is CPU-only ("+cpu", "py3.8_cpu_0", "Torch not compiled with CUDA enabled").
    cpu_build_evidence: str | None = None
    # The text that shows torch did use the GPU (an out-of-memory error on GPU 0, a tensor on cuda:0).
    gpu_use_evidence: str | None = None
    # The text of a framework that ran on the CPU where it would use a GPU torch reached (whisper's "FP16 is not
    # supported on CPU; using FP32 instead", "No GPU found, using CPU"): torch did not reach it, or the job chose CPU.
    cpu_fallback_evidence: str | None = None
    # The reporter says the torch installed is the CPU one ("it defaults to the [cpu] version"): a CUDA build's
    # version elsewhere in the text is another state (their workaround), not the failing one
    cpu_version_said: str | None = None
    companions: dict[str, str] = msgspec.field(
        default_factory=dict
    )  # torchvision / torchaudio / xformers -> version seen
    # Other torch builds the report names ("swapped 2.9.1+cu128 for 2.9.0+cpu"), besides `version`.
    other_versions: list[str] = msgspec.field(default_factory=list)
    # A pasted report where another session answers is_available() True (another container, before / after a
    # change): which torch answered it, "unknown" when that session did not print its version.
    available_elsewhere: str | None = None
    # The CUDA that working session's torch was built with, when it printed it ("9.0.176" beside a failing "10.0.130")
    cuda_elsewhere: str | None = None
    # The command line whose is_available() answered False ("srun python -c ..."): a Slurm step, another interpreter
    unavailable_command: str | None = None


class GpuDevice(msgspec.Struct):
    index: int
    name: str
    uuid: str | None = None
    memory_total_bytes: int | None = None
    compute_capability: str | None = None  # "8.6"
    pci_bus_id: str | None = None
    mig_mode: bool | None = None
    error: str | None = None  # NVML's reason when the device answers nothing (e.g. "GPU is lost")
    mig_uuids: list[str] = msgspec.field(default_factory=list)  # "MIG-..." of its MIG instances, when MIG is on
    # Where the device was seen: nvml | nvidia-smi | collect_env | torch-warning | text
    source: str | None = None
    unsupported_by_torch: bool | None = None  # torch's own warning said this GPU is not supported by the build
    compute_mode: str | None = None  # Default | Exclusive_Process | Prohibited, when shown


class DriverFacts(msgspec.Struct):
    nvml_loaded: bool | None = None
    nvml_error: str | None = None  # e.g. "Driver/library version mismatch"
    driver_version: str | None = None  # "535.104.05"
    cuda_driver_version: str | None = None  # the highest CUDA the driver supports, "12.2"
    devices: list[GpuDevice] = msgspec.field(default_factory=list)
    # A pasted nvidia-smi said "No devices were found" (a positive "no GPU", unlike a missing fact).
    no_devices_reported: bool | None = None


class HostFacts(msgspec.Struct):
    python_version: str | None = None
    # The Python the job runs with, where the report runs it by path (`.\python_embeded\python.exe`): a fix's pip
    # must be that Python's, or it installs into another one.
    python_command: str | None = None
    # The environment is a uv project (`uv sync`, `uv add`, `uv run`, uv.lock): its venv has no pip, and `uv sync`
    # reinstalls what pyproject.toml pins, so a fix goes through uv and the project's index settings.
    uv_project: bool | None = None
    # uv manages the environment without a project: `uv pip install` / `uv venv` seen, but none of uv_project's marks
    # (a uv venv has no pip, and has no pyproject.toml for `uv sync` to restore)
    uv_venv: bool | None = None
    platform: str | None = None
    in_container: bool | None = None
    container_kind: str | None = None  # docker | podman | kubernetes | ...
    wsl: bool | None = None
    wsl_version: int | None = None  # 1: a 4.4.0-NNNNN-Microsoft kernel (no GPU access); 2: microsoft-standard
    wsl_kernel: str | None = None  # WSL 2's kernel release ("5.10.16.3"): GPU access needs 5.10.43.3 or later
    # The Windows build ("Microsoft Windows [Version 10.0.19042.1052]" -> 19042): WSL 2 reaches the GPU from Windows
    # 10 21H2 (19044) and Windows 11; 19041-19043 have no GPU paravirtualisation (/dev/dxg) at all.
    windows_build: int | None = None
    kernel_stated: str | None = None  # a kernel release the text states without a uname line ("Kernel Version 5.4.72")
    # A virtual machine shown by its display adapter (Hyper-V, VMware, VirtualBox, QEMU): no GPU without passthrough.
    virtual_machine: str | None = None
    dev_nodes: list[str] | None = None  # /dev/nvidia*
    proc_driver_version: str | None = None  # /proc/driver/nvidia/version
    # Two halves of the driver the text shows installed from different releases: the user-space driver (a
    # NVIDIA-Linux-*.run with --no-kernel-modules) and a kernel module built apart (open-gpu-kernel-modules-*)
    userspace_driver_installed: str | None = None
    kernel_module_installed: str | None = None
    pci_nvidia_devices: int | None = None  # NVIDIA vendor id 0x10de on the PCI bus
    os_name: str | None = None  # linux | windows | darwin
    macos_version: str | None = None  # "12.2.1": platform.mac_ver(), collect_env's OS line, sw_vers
    machine: str | None = None  # x86_64 | aarch64 | ...
    # An x86_64 Python on an Apple silicon Mac (collect_env's "OS: macOS 15.3 (x86_64)" beside "CPU: Apple M2 Pro"):
    # it runs under Rosetta, where torch sees an Intel Mac and an old macOS ("macOS-10.16"), and MPS falls short
    rosetta: bool | None = None
    # Whether the container was started with GPU access (--gpus / nvidia runtime), when the text or env shows it.
    container_gpu_requested: bool | None = None
    cuda_toolkit_version: str | None = None  # nvcc / "CUDA runtime version" of collect_env: NOT what torch uses
    # A pasted report's other signs about the hardware (the probe leaves these None).
    other_gpus: list[str] = msgspec.field(default_factory=list)  # non-NVIDIA graphics named ("Mesa Intel Xe Graphics")
    no_gpu_stated: bool | None = None  # the reporter says the machine has no (NVIDIA) GPU
    runtime: str | None = None  # a hosted runtime named in the text: colab | kaggle
    nvidia_smi_missing: bool | None = None  # "nvidia-smi: command not found" where it was run
    # The reporter says nvidia-smi works ("I have good nvidia-smi in the docker container"): the GPU and NVML reach
    # that place, whatever torch says there.
    nvidia_smi_works_stated: bool | None = None
    # An NVIDIA Jetson (Tegra SoC: integrated GPU, no nvidia-smi, CUDA from JetPack): the mark that showed it
    # ("Jetson Nano", "L4T 32.4.3", "tegra"), and the JetPack version when the text gives it.
    jetson: str | None = None
    jetpack_version: str | None = None
    jetpack_of_l4t: bool = False  # jetpack_version was read from the L4T release (a table), not stated
    # The JetPack generation (4, 5, 6) when the exact version is not given: it fixes the Python that NVIDIA's wheels
    # are built for (3.6, 3.8, 3.10). Read from the L4T major (R32, R35, R36), the Tegra kernel (4.9, 5.10, 5.15), or
    # the CUDA that JetPack ships (10.x, 11.4, 12.x).
    jetpack_major: int | None = None
    # What showed a container as a fact (/.dockerenv, a `docker run` line, a container prompt, the NVIDIA container
    # banner), as opposed to prose that only mentions one; the runtime when it is not docker (enroot, singularity, ...).
    container_evidence: str | None = None
    gpu_named: str | None = None  # a GPU the reporter names without a driver's listing ("GTX 1080Ti"); not proof
    # Every GPU model named so (gpu_named first): "a Tesla K80 and two Tesla K40c cards" names two.
    gpus_named: list[str] = msgspec.field(default_factory=list)
    secure_boot: bool | None = None  # the kernel says Secure Boot is enabled (it refuses unsigned modules)
    # The reporter says a reboot was already tried and the problem stayed ("Tried rebooting, but still doesn't work"):
    # a module loaded after it is the one installed, and a fix that starts with a reboot is one they have done.
    rebooted: bool | None = None
    # The reporter says the same machine works for another user, or as root ("user A gets True, user B doesn't",
    # "works with sudo"): torch and the driver are fine, the failing user cannot open the GPU's device files.
    other_user_works: bool | None = None
    # A pasted report shows conda on the machine ("[conda]" lines, a conda command or path, a conda prompt).
    conda_seen: bool | None = None


class ErrorSeen(msgspec.Struct):
    """An error text of the catalogue (gputriage.data.error_signatures) found in a pasted report."""

    key: str  # the signature's id ("cuda-804")
    finding: str | None  # the rung-1 finding (or family) it points to; None: not a rung-1 cause
    text: str  # the line it was read from, cut short
    cuda_error: int | None = None
    # The installed package, not torch, whose frame the traceback ends in just above the error
    # (".../site-packages/cpm_kernels/library/cuda.py"): its own compiled kernels raised it, not torch's
    package: str | None = None


class Environment(msgspec.Struct):
    source: str = "probe"  # probe | text
    torch: TorchFacts = msgspec.field(default_factory=TorchFacts)
    driver: DriverFacts = msgspec.field(default_factory=DriverFacts)
    host: HostFacts = msgspec.field(default_factory=HostFacts)
    env_vars: dict[str, str] = msgspec.field(default_factory=dict)
    # Facts that could not be told (from a pasted text, or a probe that failed), as sentences.
    unknown: list[str] = msgspec.field(default_factory=list)
    errors: list[ErrorSeen] = msgspec.field(default_factory=list)  # error texts of a pasted report, in order

    def measured_rungs(self) -> set[int]:
        return {1}

    def unmeasured_rungs(self) -> dict[int, str]:
        return {}

    def self_check(self) -> list[str]:
        problems = []
        indices = [d.index for d in self.driver.devices]
        if len(set(indices)) != len(indices):
            problems.append(f"environment: duplicate GPU indices {indices}")
        if self.source not in ("probe", "text"):
            problems.append(f"environment: source is {self.source!r}, expected 'probe' or 'text'")
        if self.torch.installed is False and self.torch.is_available:
            problems.append("environment: torch is not installed yet CUDA is marked available")
        return problems
