"""Rules for rung 1 (see docs/contract.md's finding catalogue): can this torch reach the GPU?

Registration order is the causal order, which decides the root cause among findings of equal severity: a missing
torch before a broken driver, before a GPU that no one can see, before a build that cannot use it, before the
finer causes (CUDA_VISIBLE_DEVICES, the driver's age, the architecture, a failing CUDA init). Rules that would
only restate what an earlier rule explains stay silent (e.g. "no device" errors when CUDA_VISIBLE_DEVICES hides all).
When the job is meant for another device (--expect-device meta/mps/xpu/cpu), NVIDIA-specific findings are info.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gputriage.data.cuda_tables import (
    CUDA_ERRORS,
    NO_DEVICE_ERRORS,
    TORCH_RELEASES,
    arch_supports,
    compat_min_driver_for,
    min_driver_for,
    release_of,
    release_predates,
    version_tuple,
)
from gputriage.data.error_signatures import INTEL_XPU, NO_DEVICE, NO_DRIVER, signature
from gputriage.data.gpu_names import capability_of
from gputriage.findings import Evidence, Finding, Severity
from gputriage.record import Run
from gputriage.record.device import device_type
from gputriage.record.environment import Environment
from gputriage.rules.env_facts import (
    WSL_GPU_WINDOWS_BUILD,
    amd_gpu,
    arch_builds,
    base_version,
    build_arch_list,
    cuda_at_most,
    cuda_variant_for,
    driver_cuda,
    driver_version,
    errors_pointing_to,
    expected_kind,
    gpu_presence,
    has_error,
    intel_gpu,
    is_rocm,
    nvidia_devices,
    nvidia_expected,
    nvidia_nodes,
    old_windows_for_wsl_gpu,
    parse_visible_devices,
    pip_install,
    runs_on_driver,
    sm_name,
)
from gputriage.rules.env_fixes import (
    WSL_GPU_KERNEL,
    absence,
    arch_fix,
    cpu_build_fix,
    driver_fix,
    for_the_jobs_python,
    mps_fix,
    old_wsl_kernel,
)
from gputriage.rules.registry import rule

RUNG = 1
_REBOOT_OR_RELOAD = (
    "sudo reboot\n"
    "# or, with no process using the GPU, reload the kernel modules instead:\n"
    "sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia && nvidia-smi"
)


def _finding(
    run: Run, code: str, title: str, evidence: Evidence, fix: str, *, nvidia: bool = True, keep_none: str = ""
) -> Finding:
    """A rung-1 finding: critical, or info when it is NVIDIA-specific and the job is meant for another device.

    Evidence entries that are None (facts not known) are dropped, except `keep_none`, whose null is the proof.
    """
    severity = Severity.INFO if nvidia and not nvidia_expected(run) else Severity.CRITICAL
    shown = {k: v for k, v in evidence.items() if v is not None or k == keep_none}
    if run.environment is not None:
        fix = for_the_jobs_python(fix, run.environment)
    return Finding(code=code, rung=RUNG, severity=severity, title=title, evidence=shown, fix=fix)


def _env(run: Run) -> Environment | None:
    return run.environment


def _common_evidence(env: Environment) -> Evidence:
    return {"torch_version": env.torch.version, "torch_cuda": env.torch.cuda_version}


@rule
def torch_not_installed(run: Run) -> Iterator[Finding]:
    env = _env(run)
    if env is None or env.torch.installed is not False:
        return
    variant = cuda_variant_for(env)
    install = variant.command() if variant and expected_kind(run) == "cuda" else "python -m pip install torch"
    yield _finding(
        run,
        "torch-not-installed",
        "PyTorch cannot be imported in this Python",
        {"import_error": env.torch.import_error, "python": env.host.python_version, "torch_version": env.torch.version},
        "# run this where the import fails (in a notebook: import sys; print(sys.executable)):\n"
        'python -c "import sys; print(sys.executable)"\n'
        "# then install torch into that Python, or switch the notebook's kernel to the env that has torch:\n"
        + install.replace("python -m pip", "<that python> -m pip", 1),
        nvidia=False,
    )


@rule
def driver_library_mismatch(run: Run) -> Iterator[Finding]:
    env = _env(run)
    if env is None:
        return
    error = env.driver.nvml_error or next((e.text for e in errors_pointing_to(env, "driver-library-mismatch")), "")
    kernel, library = env.host.proc_driver_version, env.driver.driver_version
    versions_differ = bool(kernel and library and kernel != library)
    if "mismatch" not in error.lower() and not versions_differ:
        return
    evidence: Evidence = {"nvml_error": error or None, "kernel_module_version": kernel, "library_version": library}
    userspace, module = env.host.userspace_driver_installed, env.host.kernel_module_installed
    if userspace and module and userspace != module:
        # two releases installed as two halves: no reboot makes them one
        evidence.update({"kernel_module_version": module, "library_version": userspace})
        yield _finding(
            run,
            "driver-library-mismatch",
            f"The NVIDIA user-space driver ({userspace}) and the kernel module built apart ({module}) are different "
            "releases, so NVML and CUDA refuse to start; a reboot does not change that",
            evidence,
            f"cat /proc/driver/nvidia/version   # the kernel module loaded ({module})\n"
            f"# install the user-space driver of the module's release, without its own modules:\n"
            f"sudo sh ./NVIDIA-Linux-x86_64-{module}.run --no-kernel-modules\n"
            f"# or build the kernel module of the user-space release ({userspace}); then: nvidia-smi",
        )
        return
    if env.host.rebooted and versions_differ:
        yield _finding(run, "driver-library-mismatch", *_module_not_updated(kernel or "", library or "", evidence))
        return
    yield _finding(
        run,
        "driver-library-mismatch",
        "The NVIDIA driver was upgraded but the old kernel module is still loaded, so NVML and CUDA refuse to start",
        evidence,
        _REBOOT_OR_RELOAD,
    )


def _module_not_updated(kernel: str, library: str, evidence: Evidence) -> tuple[str, Evidence, str]:
    """A reboot was tried and the kernel still loads the old release's module: the module installed on disk is the
    old one (an upgrade that half failed, DKMS that did not build for this kernel), and only installing the module of
    the user-space release makes them one."""
    branch = library.split(".", 1)[0]
    evidence["rebooted"] = True
    title = (
        f"The kernel module loaded after a reboot ({kernel}) is of another release than the user-space driver "
        f"({library}): the module installed was not updated, so rebooting again does not help"
    )
    fix = (
        f"dkms status   # the module built for the running kernel: {kernel}, not {library}\n"
        f"# install the kernel module of the user-space release ({library}), then reboot:\n"
        f"sudo apt --fix-broken install && sudo apt install --reinstall nvidia-dkms-{branch} "
        f"nvidia-driver-{branch}   # Ubuntu\n"
        "sudo apt --fix-broken install && sudo apt install --reinstall nvidia-kernel-dkms nvidia-driver   # Debian\n"
        "# other distributions: reinstall the driver's kernel-module package (akmod-nvidia, nvidia-dkms) of that "
        "release\n"
        "sudo reboot && nvidia-smi"
    )
    return title, evidence, fix


@rule
def container_without_gpu(run: Run) -> Iterator[Finding]:
    """In a container that did not get the GPU, with a sign that a GPU was meant (DESIGN: not on GPU-less hosts)."""
    env = _env(run)
    if env is None or not env.host.in_container or gpu_presence(env) == "none" or env.host.pci_nvidia_devices == 0:
        return
    lacks = _container_lacks_gpu(env)
    if lacks is None or not _gpu_meant(run, env) or _amd_machine(env):
        return
    requested = env.host.container_gpu_requested
    evidence: Evidence = {
        "container": env.host.container_kind,
        "why": lacks,
        "gpu_flag_given": requested,
        "NVIDIA_VISIBLE_DEVICES": env.env_vars.get("NVIDIA_VISIBLE_DEVICES"),
        "nvidia_device_nodes": len(nvidia_nodes(env)) if env.source == "probe" else None,
        "pci_nvidia_gpus": env.host.pci_nvidia_devices,
        "cuda_available": env.torch.is_available,
    }
    runtime_missing = has_error(env, "docker-no-gpu-runtime")
    # "started without" only when nothing in the report shows a --gpus flag: where one is shown (on a test container
    # that worked, say), the job's container is not the one it started, and how that one was started is not shown.
    access = "without access to the GPU" if requested else "that was started without access to the GPU"
    title = (
        "Docker was asked for the GPU but has no NVIDIA runtime (the NVIDIA Container Toolkit is missing)"
        if runtime_missing
        else f"This runs inside {_container_words(env.host.container_kind)} {access}"
    )
    fix = (
        "# on the host: install the NVIDIA Container Toolkit, then register it with docker:\n"
        "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker\n"
        "docker run --rm --gpus all ubuntu nvidia-smi   # must list the GPUs"
        if runtime_missing
        else _container_gpu_fix(env.host.container_kind)
    )
    if lacks == NO_COMPUTE_LIBRARY:
        title = (
            f"This runs inside {_container_words(env.host.container_kind)} that has the GPU but not its CUDA library"
        )
        fix = _NO_COMPUTE_FIX
    yield _finding(run, "container-without-gpu", title, evidence, fix)


def _container_lacks_gpu(env: Environment) -> str | None:
    """Why the GPU is missing inside the container, or None when nothing shows that it is."""
    h = env.host
    signs = (
        (has_error(env, "docker-no-gpu-runtime"), "docker: could not select device driver with capabilities [[gpu]]"),
        (h.container_gpu_requested is False, "the container was started without --gpus / the NVIDIA runtime"),
        (bool(h.nvidia_smi_missing), "nvidia-smi is not found inside the container: the driver was not mounted"),
        (bool(errors_pointing_to(env, NO_DRIVER)), "torch finds no NVIDIA driver library inside the container"),
        (has_error(env, "nvml-unknown"), "NVML cannot open the GPU inside the container: it lost its device access"),
    )
    why = next((reason for shown, reason in signs if shown), None)
    if why is not None:
        return why
    if env.source == "probe":
        return None if nvidia_devices(env) or nvidia_nodes(env) else "no /dev/nvidia* device inside the container"
    other_causes = errors_pointing_to(
        env, "driver-too-old", "cuda-init-failed", "arch-not-supported", "driver-library-mismatch", "cpu-only-build"
    )
    # is_available() False alone is the container's fault only when nothing in the report shows the GPU reachable
    # from a container on the same set-up: another session answering True (another container, before / after) says
    # the runtime passes the GPU, and the build is the difference.
    shown = env.torch.available_elsewhere is None
    if env.torch.is_available is False and shown and not other_causes and not env.torch.is_cpu_build:
        return NO_COMPUTE_LIBRARY if h.nvidia_smi_works_stated else "torch sees no CUDA device inside the container"
    return None


# nvidia-smi works in the container (the device and NVML, the "utility" capability, are in) while torch finds no GPU:
# the runtime left out the CUDA driver library, libcuda, which only the "compute" capability mounts (trial 10: a compose
# file's NVIDIA_DRIVER_CAPABILITIES without compute was told to start the container with --gpus, which it had).
NO_COMPUTE_LIBRARY = (
    "nvidia-smi works inside the container, so the GPU is passed in, but torch finds no CUDA device there: the CUDA "
    "driver library (libcuda) is not mounted"
)
_NO_COMPUTE_FIX = (
    "ls -l /usr/lib/x86_64-linux-gnu/libcuda.so* /usr/lib64/libcuda.so* 2>/dev/null   # in the container: none here\n"
    "# the NVIDIA runtime mounts libcuda only with the 'compute' capability: start the container with\n"
    "docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility IMAGE ...\n"
    "# compose: environment: [NVIDIA_DRIVER_CAPABILITIES=compute,utility], and in\n"
    "#   deploy.resources.reservations.devices: [{driver: nvidia, count: all, capabilities: [gpu]}]\n"
    "python -c 'import torch; print(torch.version.cuda)'   # None instead: a CPU build of torch, the other cause"
)


_RUNTIME_FIXES = {
    "enroot": (
        "# enroot / pyxis: the driver is mounted only when NVIDIA_VISIBLE_DEVICES names the GPUs (the hook reads it)\n"
        "export NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility\n"
        "srun --gpus=1 --container-image=IMAGE nvidia-smi   # pyxis: ask SLURM for the GPU; must list it"
    ),
    "singularity": "singularity exec --nv IMAGE nvidia-smi   # --nv binds the host driver and /dev/nvidia*",
    "apptainer": "apptainer exec --nv IMAGE nvidia-smi   # --nv binds the host driver and /dev/nvidia*",
    "lxd": (
        "lxc config device add CONTAINER gpu gpu   # pass the GPU in\n"
        "lxc config set CONTAINER nvidia.runtime=true && lxc restart CONTAINER   # mounts the host driver"
    ),
}


def _container_gpu_fix(kind: str | None) -> str:
    if kind in _RUNTIME_FIXES:
        return _RUNTIME_FIXES[kind]
    docker = (
        "# on the host: install the NVIDIA Container Toolkit once, then start the container with the GPUs\n"
        "docker run --gpus all IMAGE ...\n"
        "# compose: deploy.resources.reservations.devices: [{driver: nvidia, count: all, capabilities: [gpu]}]"
    )
    k8s = "# Kubernetes: request them in the pod spec: resources.limits: {nvidia.com/gpu: 1} (NVIDIA device plugin)"
    return f"{k8s}\n{docker}" if kind == "kubernetes" else f"{docker}\n{k8s}"


def _container_words(kind: str | None) -> str:
    """ "a docker container", "a Kubernetes pod", "a podman container", "a container"."""
    if kind == "kubernetes":
        return "a Kubernetes pod"
    return f"a {kind} container" if kind else "a container"


def _gpu_meant(run: Run, env: Environment) -> bool:
    """A sign that the job was meant for a GPU: the intent, a CUDA build, a GPU request or a GPU on the host."""
    return bool(
        device_type(run.expect_device) == "cuda"
        or (env.source == "text" and expected_kind(run) == "cuda")
        or (env.torch.cuda_version and not env.torch.is_cpu_build)
        or env.host.container_gpu_requested
        or env.env_vars.get("NVIDIA_VISIBLE_DEVICES")
        or (env.host.pci_nvidia_devices or 0) > 0
    )


_SECURE_BOOT_FIX = (
    '# Secure Boot loads only signed modules ("Key was rejected by service"): enroll the key DKMS signs the nvidia\n'
    "# module with, or turn Secure Boot off in the firmware settings\n"
    "sudo mokutil --import /var/lib/shim-signed/mok/MOK.der   # Ubuntu's DKMS key; set a one-time password\n"
    "sudo reboot   # the blue MOK manager appears: Enroll MOK, Continue, the password\n"
    "sudo modprobe nvidia && nvidia-smi   # after the reboot: must list the GPU"
)


@rule
def driver_not_loaded(run: Run) -> Iterator[Finding]:
    env = _env(run)
    if env is None or is_rocm(env) or gpu_presence(env) == "none":
        return
    said = env.source == "text" and errors_pointing_to(env, "driver-not-loaded")
    if nvidia_devices(env) and not said:
        return  # a GPU listed by a working driver (a table pasted after the fix does not undo the error above it)
    pci = env.host.pci_nvidia_devices
    error = (env.driver.nvml_error or "").lower()
    nvml_says = "driver not loaded" in error or "couldn't communicate" in error
    module_missing = errors_pointing_to(env, "driver-not-loaded")
    if env.host.in_container and not module_missing:
        return  # inside a container, a missing driver is the container's; a missing kernel module is the host's
    board_without_driver = (pci or 0) > 0 and not nvidia_nodes(env) and env.driver.nvml_loaded is not True
    no_driver_on_board = (pci or 0) > 0 and errors_pointing_to(env, NO_DRIVER)
    if not (board_without_driver or no_driver_on_board or ((nvml_says or module_missing) and pci != 0)):
        return
    evidence: Evidence = {
        "pci_nvidia_gpus": pci,
        "nvml_error": env.driver.nvml_error,
        "error": module_missing[0].text if module_missing else None,
        "nvidia_device_nodes": 0 if env.source == "probe" else None,
    }
    title = (
        "An NVIDIA GPU is installed, but its driver is not loaded, so nothing can use it"
        if pci
        else "The NVIDIA driver is not loaded (or not installed), so nothing can use the GPU"
    )
    if env.host.wsl:  # no Linux driver to load: WSL 2's GPU is the Windows driver's
        title = "Inside WSL, nvidia-smi cannot reach the GPU through the Windows NVIDIA driver"
        yield _finding(run, "driver-not-loaded", title, evidence, _wsl_gpu_fix(None, env))
        return
    if env.host.secure_boot:  # modprobe fails for a reason loading it again cannot change
        evidence["secure_boot"] = True
        title += ": Secure Boot refuses its unsigned kernel module"
        yield _finding(run, "driver-not-loaded", title, evidence, _SECURE_BOOT_FIX)
        return
    yield _finding(
        run,
        "driver-not-loaded",
        title,
        evidence,
        "sudo modprobe nvidia && nvidia-smi\n"
        "# if modprobe fails: the driver is missing or was built for another kernel (after a kernel update):\n"
        "sudo ubuntu-drivers install   # Ubuntu; elsewhere the distribution's nvidia-driver package, then reboot\n"
        "# with Secure Boot on, enroll the module's key (mokutil) or turn Secure Boot off; blacklist nouveau",
    )


@rule
def no_gpu_visible(run: Run) -> Iterator[Finding]:
    env = _env(run)
    # a ROCm build (or a HIP error, which only a ROCm build prints) that reached its AMD GPU: not this finding's
    if env is None or ((is_rocm(env) or _hip_error(env)) and not has_error(env, "no-hip-gpu")):
        return
    if errors_pointing_to(env, INTEL_XPU):
        return  # intel_xpu_unusable names what keeps torch from the Intel GPU
    presence = gpu_presence(env)
    no_driver = env.source == "text" and presence == "unknown" and errors_pointing_to(env, NO_DRIVER)
    if presence != "none" and not (no_driver and not env.host.in_container):
        return
    evidence: Evidence = {
        "nvml_gpus": _nvml_gpus(env),
        "nvml_error": env.driver.nvml_error,
        "nvidia_device_nodes": len(nvidia_nodes(env)) if env.source == "probe" else None,
        "pci_nvidia_gpus": env.host.pci_nvidia_devices,
        "other_gpus": ", ".join(env.host.other_gpus) or None,
        "torch_cuda_devices": env.torch.device_count,
        "container": env.host.container_kind,
        "os": env.host.os_name if env.source == "text" else None,
        "rosetta": env.host.rosetta,
        "other_user_works": env.host.other_user_works,
        "error": next((e.text for e in errors_pointing_to(env, NO_DRIVER, NO_DEVICE)), None),
    }
    expected = expected_kind(run)
    if expected == "cuda" and env.host.wsl and old_windows_for_wsl_gpu(env):
        title = f"WSL 2 cannot reach the NVIDIA GPU here: {absence(env)}"  # a GPU may well be there, for Windows
    elif expected == "cuda" and has_error(env, "no-hip-gpu"):
        # "No HIP GPUs are available": the ROCm build's own words; its user asks about the AMD GPU, not NVIDIA's
        amd = amd_gpu(env)
        title = f"torch's ROCm build cannot open the AMD GPU{f' ({amd})' if amd else ''}: No HIP GPUs are available"
    elif expected == "cuda":
        title = f"This machine has no NVIDIA GPU that anything could use: {absence(env)}"
    elif device_type(run.expect_device) is None and expected == "cpu":
        title = (
            f"This machine has no NVIDIA GPU ({absence(env)}) and no other accelerator, so the run is judged for the "
            "CPU; pass --expect-device cuda if the job is meant for a GPU"
        )
    else:
        title = f"This machine has no NVIDIA GPU, which is fine: the job is meant to run on {expected}"
    finding = _finding(run, "no-gpu-visible", title, evidence, _no_gpu_fix(env))
    if env.host.os_name == "darwin" and env.host.rosetta:
        # the Mac's own GPU is what torch misses here: an x86_64 Python under Rosetta sees macOS 10.16, where MPS is
        # unavailable or cut short (bf16 "only supported on MacOS 14 or newer" on macOS 15.3, a trial): a fault to
        # fix, not a note beside an "inconclusive"
        finding.title = (
            "This Python is x86_64 and runs under Rosetta on an Apple silicon Mac: torch sees an Intel Mac on macOS "
            "10.16, so MPS (Apple's GPU) is unavailable or falls short of what this macOS has"
        )
        finding.severity = Severity.WARNING
    yield finding


def _nvml_gpus(env: Environment) -> int | None:
    """The GPUs NVML listed, where NVML was read: by the probe, or by an nvidia-smi in the pasted text (its driver
    line, or its "No devices were found"); a paste without nvidia-smi measured no count."""
    d = env.driver
    read = env.source == "probe" or d.driver_version is not None or d.no_devices_reported or d.nvml_loaded is not None
    return len(d.devices) if read or d.devices else None


def _amd_machine(env: Environment) -> bool:
    """The GPU meant is AMD's (a ROCm build of torch, an AMD GPU named, a HIP error): a container reaches it through
    /dev/kfd and /dev/dri, and NVIDIA's container toolkit has nothing to do with it."""
    return is_rocm(env) or amd_gpu(env) is not None or has_error(env, "no-hip-gpu") or _hip_error(env)


def _hip_error(env: Environment) -> bool:
    return any("hiperror" in e.text.lower() or "hip error" in e.text.lower() for e in env.errors)


def _no_gpu_fix(env: Environment) -> str:
    if env.host.os_name == "darwin":
        return mps_fix(env)
    amd = amd_gpu(env)
    hip_error = signature("no-hip-gpu") if has_error(env, "no-hip-gpu") else None
    if hip_error is not None:  # only a ROCm build says "No HIP GPUs": it is installed, and cannot open the GPU
        named = f"# the GPU is AMD ({amd}) and torch is a ROCm build that cannot open it:\n" if amd else ""
        return named + hip_error.fix
    other = _other_vendor_fix(env, amd)
    if other is not None:
        return other
    if env.host.virtual_machine:
        return (
            f"# a {env.host.virtual_machine} guest sees no GPU unless the host passes it through\n"
            "# on a Windows host, WSL 2 reaches the NVIDIA GPU with the Windows driver alone (no driver in Linux);\n"
            "# otherwise give the VM the GPU: Hyper-V DDA, or PCI passthrough in VMware / VirtualBox / KVM\n"
            "nvidia-smi -L   # inside the guest: must list the GPU"
        )
    if env.host.wsl:
        return _wsl_fix(env)
    fix = "# run on a machine (or cloud instance type) that has an NVIDIA GPU, then check with:\nnvidia-smi -L"
    if env.host.in_container:
        runtime = _RUNTIME_FIXES.get(env.host.container_kind or "", "docker run --gpus all IMAGE ...")
        fix += "\n# this is a container: start it with the GPUs: " + runtime.split("\n")[0]
    return fix


def _other_vendor_fix(env: Environment, amd: str | None) -> str | None:
    """The torch build for the GPU the machine has, when it is AMD's or Intel's."""
    if amd is not None:
        return _amd_fix(env, amd)
    intel = intel_gpu(env)
    return _intel_fix(env, intel) if intel is not None else None


def _intel_fix(env: Environment, intel: str) -> str:
    """An Intel GPU: PyTorch's XPU build (2.5 and later) runs on Intel's Arc and integrated GPUs, as device "xpu"."""
    container = (
        "\n# in a container, pass the GPU in with --device /dev/dri (not --gpus, which is NVIDIA's)"
        if env.host.in_container
        else ""
    )
    return (
        f"# the GPU is Intel's ({intel}): CUDA builds are for NVIDIA GPUs. PyTorch's XPU build runs on Intel Arc\n"
        "# GPUs and Core Ultra's Arc graphics (older HD/UHD/Iris graphics have no torch GPU build: use a machine with\n"
        "# a GPU, or the CPU):\n"
        "python -m pip uninstall -y torch torchvision torchaudio\n"
        "python -m pip install torch torchvision torchaudio --index-url https://download.pytorch.org/whl/xpu\n"
        'python -c "import torch; print(torch.xpu.is_available())"   # then use device = "xpu"' + container
    )


@rule
def intel_xpu_unusable(run: Run) -> Iterator[Finding]:
    """An Intel GPU that torch cannot use: "Torch not compiled with XPU enabled" (a build without XPU), or "XPU Device
    count is zero" (the XPU build, and no Intel GPU driver under it)."""
    env = _env(run)
    seen = next(iter(errors_pointing_to(env, INTEL_XPU)), None) if env is not None else None
    if env is None:
        return
    if seen is None:
        yield from _xpu_answers_false(run, env)
        return
    intel = intel_gpu(env)
    gpu = f" ({intel})" if intel else ""
    evidence: Evidence = {"message": seen.text, "gpu": intel, "torch_version": env.torch.version}
    if seen.key == "xpu-not-compiled":
        title = f"This torch was built without XPU support, so it cannot use the Intel GPU{gpu}"
        yield _finding(run, "cpu-only-build", title, evidence, _intel_fix(env, intel or "Intel"), nvidia=False)
        return
    if seen.key == "xpu-runtime-uninitialized":
        title = (
            f"torch's XPU build cannot start Intel's GPU runtime (Level Zero){gpu}: the compute runtime is missing, "
            "or older than the oneAPI build torch was installed with"
        )
        fix = _INTEL_DRIVER_FIX + "\n# listed, and still this error: update the compute runtime and oneAPI"
        yield _finding(run, "driver-not-loaded", title, evidence, fix, nvidia=False)
        return
    title = f"torch's XPU build finds no Intel GPU{gpu}: Intel's GPU driver under it is missing or cannot be opened"
    yield _finding(run, "driver-not-loaded", title, evidence, _INTEL_DRIVER_FIX, nvidia=False)


# A variant tag other than XPU's, or none (PyPI's wheels: CUDA on Linux, CPU elsewhere); a source build's "+git..."
# may have XPU.
_NOT_XPU_BUILD = re.compile(r"\+(?:cu[0-9]{2,3}|cpu|rocm[0-9.]*)\b|^[0-9.]+$")


def _xpu_answers_false(run: Run, env: Environment) -> Iterator[Finding]:
    """torch.xpu.is_available() answered False, in a report about the Intel GPU, with no error that says why: a
    build without XPU (a torch whose version names another variant) or the XPU build with no usable Intel driver."""
    if expected_kind(run) != "xpu" or env.torch.other_accelerators.get("xpu") is not False:
        return
    intel = intel_gpu(env)
    gpu, version = f" ({intel})" if intel else "", env.torch.version or ""
    evidence: Evidence = {"xpu_available": False, "gpu": intel, "torch_version": env.torch.version}
    if version and _NOT_XPU_BUILD.search(version):  # 2.5.1+cu121, +cpu, +rocm6.2, or PyPI's untagged wheel
        title = f"torch {version} is not the XPU build, so it cannot use the Intel GPU{gpu}"
        yield _finding(run, "cpu-only-build", title, evidence, _intel_fix(env, intel or "Intel"), nvidia=False)
        return
    build = f"torch {version}" if version else "torch"
    title = f"{build} answers torch.xpu.is_available() False: it finds no usable Intel GPU{gpu}"
    yield _finding(run, "driver-not-loaded", title, evidence, _INTEL_DRIVER_FIX, nvidia=False)


_INTEL_DRIVER_FIX = (
    "clinfo -l   # the Intel GPU must be listed (Level Zero and OpenCL see it through Intel's compute runtime)\n"
    "# not listed: install Intel's GPU driver for this distribution and kernel (dgpu-docs.intel.com); Ubuntu 24.04:\n"
    "sudo apt install libze-intel-gpu1 libze1 intel-opencl-icd clinfo\n"
    "ls -l /dev/dri/renderD*; groups   # listed but unusable: the user must be in the group of renderD* (render)\n"
    "sudo usermod -aG render,video $USER   # then log out and in\n"
    'python -c "import torch; print(torch.xpu.is_available(), torch.xpu.device_count())"'
)


def _amd_fix(env: Environment, amd: str) -> str:
    """An AMD GPU and a torch that cannot use it: ROCm's build on Linux, torch-directml on Windows."""
    if env.host.os_name == "windows":
        return (
            f"# the GPU is AMD ({amd}): PyTorch's CUDA builds are for NVIDIA GPUs, and its ROCm builds run on Linux\n"
            "# on Windows, torch-directml runs torch on any DirectX 12 GPU, AMD's included:\n"
            "python -m pip install torch-directml   # then: import torch_directml; device = torch_directml.device()\n"
            "# (ComfyUI: python main.py --directml); or Linux with ROCm, where ROCm supports this GPU"
        )
    if env.host.other_user_works:  # the same machine works for another user: the GPU's device files, not torch
        return (
            f"# the GPU is AMD ({amd}) and it works for another user on this machine: this user cannot open its\n"
            "# device files (/dev/kfd, /dev/dri/renderD*), which ROCm gives to the render and video groups\n"
            "ls -l /dev/kfd /dev/dri/renderD*; groups   # the failing user must be in their group\n"
            "sudo usermod -a -G render,video $USER   # then log out and in (or: newgrp render)"
        )
    t = env.torch
    cuda_build = f"torch {t.version} is a CUDA build, for NVIDIA GPUs only"
    build = cuda_build if t.cuda_version else "CUDA builds cannot use it"
    own_release = bool(t.version) and release_of(t.version or "") in ROCM_OF_RELEASE
    pinned = base_version(t.version or "") if own_release else _rocm_release_for_python(env)
    rocm = ROCM_OF_RELEASE.get(release_of(pinned)) if pinned else None
    if pinned and rocm is not None:
        # the same torch from its own ROCm index: an app that pins its torch keeps it, and that release's Pythons are
        # the ones the user's environment already runs (the newest index has no wheel for an old Python or pin)
        install = f"python -m pip install torch=={pinned} torchvision torchaudio --index-url {ROCM_WHEELS}{rocm}"
        index_note = f"# ROCm {rocm} is the newest ROCm that torch {pinned} was built for; a newer torch has newer ones"
    else:
        install = f"python -m pip install torch torchvision torchaudio --index-url {ROCM_WHEELS}{ROCM_LATEST}"
        index_note = "# pick the rocmX.Y index matching the installed ROCm (https://pytorch.org/get-started/locally/)"
    return (
        f"# the GPU is AMD ({amd}): {build}; install PyTorch's ROCm build (Linux)\n"
        "python -m pip uninstall -y torch torchvision torchaudio\n"
        f"{install}\n"
        f"{index_note}; torch.cuda.is_available() is True on ROCm builds"
    )


def _rocm_release_for_python(env: Environment) -> str | None:
    """ "2.4.*" for a Python the newest ROCm wheels lack (3.8 there): the newest release with ROCm wheels for it."""
    python = env.host.python_version
    if not python:
        return None
    newest = next(reversed(ROCM_OF_RELEASE))
    for release in reversed(ROCM_OF_RELEASE):
        pythons = TORCH_RELEASES[release].python if release in TORCH_RELEASES else None
        if pythons is not None and version_tuple(pythons[0]) <= version_tuple(python)[:2] <= version_tuple(pythons[1]):
            return None if release == newest else f"{release}.*"  # the newest: the newest index serves it
    return None


ROCM_WHEELS = "https://download.pytorch.org/whl/rocm"
ROCM_LATEST = "7.2"
# release -> the newest ROCm its wheels were published for (pytorch.org's previous-versions page: 2.4.1 on rocm6.1;
# the rocm5.6 index holds only 2.2.x, the failure of trial 10's installer)
ROCM_OF_RELEASE = {
    "1.13": "5.2",
    "2.0": "5.4.2",
    "2.1": "5.6",
    "2.2": "5.7",
    "2.3": "6.0",
    "2.4": "6.1",
    "2.5": "6.2",
    "2.6": "6.2.4",
    "2.7": "6.3",
    "2.8": "6.4",
}


def _wsl_fix(env: Environment) -> str:
    if old_windows_for_wsl_gpu(env):
        return (
            f"# WSL 2 reaches the GPU from Windows 10 21H2 (build {WSL_GPU_WINDOWS_BUILD}) or Windows 11; this one is "
            f"build {env.host.windows_build}\n"
            "winver   # in Windows: the build; update Windows (Settings > Windows Update), then in PowerShell:\n"
            "wsl --update\nwsl --shutdown\n"
            "nvidia-smi   # inside WSL 2: must list the GPU"
        )
    if old_wsl_kernel(env) is None:
        return _WSL_FIX
    return (
        f"# in Windows (PowerShell): update WSL's kernel ({env.host.wsl_kernel} here; GPU access needs "
        f"{WSL_GPU_KERNEL} or later)\n"
        "wsl --update\nwsl --shutdown\nwsl cat /proc/version   # the new kernel\n"
        "nvidia-smi   # inside WSL 2: must list the GPU"
    )


_WSL_FIX = (
    "# in Windows (PowerShell): the distro must run under WSL 2 (VERSION 2); WSL 1 has no GPU access\n"
    "wsl -l -v\n"
    "wsl --set-version <distro> 2\n"
    "# the driver is the Windows one (it supports WSL since R470): install no Linux NVIDIA driver inside WSL\n"
    "nvidia-smi   # inside WSL 2: must list the GPU"
)


def _visible_setting(env: Environment, index: str) -> str:
    """How to set CUDA_VISIBLE_DEVICES in the user's shell: bash, or on Windows cmd / PowerShell and the user or
    system variable that a Windows machine may carry for every program."""
    if env.host.os_name != "windows":
        return (
            f"export CUDA_VISIBLE_DEVICES={index}   # or: unset CUDA_VISIBLE_DEVICES (and remove it from the "
            "script / notebook that sets it)"
        )
    return (
        f'set CUDA_VISIBLE_DEVICES={index}   # cmd; PowerShell: $env:CUDA_VISIBLE_DEVICES="{index}"\n'
        "# set for every program (System Properties > Environment Variables, user or system): delete it there, then\n"
        "# open a new terminal; or remove it from the script / notebook that sets it"
    )


@rule
def visible_devices_hide_gpus(run: Run) -> Iterator[Finding]:
    env = _env(run)
    visible = parse_visible_devices(env) if env is not None else None
    if env is None or visible is None:
        return
    t = env.torch
    reason = _visible_devices_reason(env, visible.entries, visible.ignored, visible.visible_count)
    if reason is None:
        return
    devices = nvidia_devices(env)
    evidence: Evidence = {
        "CUDA_VISIBLE_DEVICES": visible.value,
        "entries": len(visible.entries),
        "entries_cuda_ignores": visible.ignored or None,
        "gpus_on_machine": len(devices) if devices else None,
        "gpus_cuda_will_see": visible.visible_count,
        "torch_cuda_devices": t.device_count,
        "cuda_error": t.init_error_code if t.init_error_code in (*NO_DEVICE_ERRORS, 101) else None,
        "torch_version": t.version,
    }
    first_index = "0" if devices or t.init_error_code in NO_DEVICE_ERRORS else "<index from nvidia-smi -L>"
    fix = "nvidia-smi -L   # the GPUs that exist, with their indices and UUIDs\n" + _visible_setting(env, first_index)
    uuid_bug = _uuid_count_bug(env, visible.entries)
    if uuid_bug:
        fix = _uuid_bug_fix(env, visible.entries)
    if visible.entries[:1] and visible.entries[0].lower() in ("all", "none", "void"):
        # NVIDIA_VISIBLE_DEVICES' words (the container toolkit's), written into CUDA's variable
        fix = (
            f"# {visible.entries[0]!r} is NVIDIA_VISIBLE_DEVICES' word (the container toolkit's): CUDA_VISIBLE_DEVICES "
            "takes GPU indices or UUIDs only.\n# Delete the CUDA_VISIBLE_DEVICES line (compose `environment:`, "
            "Dockerfile ENV, job script); keep NVIDIA_VISIBLE_DEVICES=all for the container\n" + fix
        )
    finding = _finding(
        run,
        "cuda-visible-devices",
        f"torch counts no GPU under CUDA_VISIBLE_DEVICES={visible.value!r}: {reason}"
        if uuid_bug
        else f"CUDA_VISIBLE_DEVICES={visible.value!r} hides the GPUs from CUDA: {reason}",
        evidence,
        fix,
    )
    if visible.visible_count and finding.severity is Severity.CRITICAL:
        finding.severity = Severity.WARNING  # some GPUs stay visible: the job runs, on fewer GPUs than meant
    yield finding


def _visible_devices_reason(
    env: Environment, entries: list[str], ignored: list[str], visible: int | None
) -> str | None:
    if not entries:
        return "it is set but empty, which means no GPU"
    if entries[0] == "-1":
        return "-1 means no GPU"
    version = env.torch.version
    uuids = _uuids(entries)
    if uuids and version and _counts_no_uuid(version):
        return f"torch {version} ignores UUID entries and counts 0 devices (pytorch#90543, fixed in 2.0)"
    if uuids and env.torch.device_count == 0:
        return (
            "torch counts 0 devices with UUID / MIG entries (torch 1.13's NVML-based count, pytorch#90543 and #95784) "
            "although CUDA itself can use the GPU"
        )
    if ignored:
        return f"CUDA ignores {'; '.join(ignored)}, so it sees {visible} GPU(s)"
    return _reason_without_gpu_list(env, entries) if visible is None else None


def _uuids(entries: list[str]) -> list[str]:
    return [e for e in entries if e.upper().startswith(("GPU-", "MIG-"))]


def _counts_no_uuid(version: str) -> bool:
    return (1, 13) <= version_tuple(version)[:2] < (2, 0)


def _uuid_count_bug(env: Environment, entries: list[str]) -> bool:
    """torch 1.13 counted devices through NVML and ignored UUID entries (pytorch#90543): the setting is right."""
    version = env.torch.version
    uuids = _uuids(entries)
    return bool(uuids) and (_counts_no_uuid(version) if version else env.torch.device_count == 0)


def _uuid_bug_fix(env: Environment, entries: list[str]) -> str:
    """Keep the UUIDs (a MIG instance is chosen by its UUID only; an index picks the whole GPU or another slice, out
    of a scheduler's allocation) and leave torch 1.13."""
    cuda = "11.7" if (env.torch.cuda_version or "").startswith("11.7") else "11.8"
    mig = any(e.upper().startswith("MIG-") for e in entries)
    keep = "a MIG instance is chosen by its UUID only" if mig else "the UUIDs are a valid choice"
    return (
        f"# keep CUDA_VISIBLE_DEVICES as it is ({keep}): torch 1.13 cannot count UUID entries, torch 2.0 can\n"
        f"{for_the_jobs_python(pip_install('2.0.1', cuda, seen=None), env)}   # or any later torch; 1.12.1 counts "
        "them too"
    )


def _reason_without_gpu_list(env: Environment, entries: list[str]) -> str | None:
    """A pasted report: the GPU list may be cut, so "CUDA sees none under this setting" is the evidence."""
    t = env.torch
    no_device = (
        t.init_error_code in (*NO_DEVICE_ERRORS, 101)
        or t.device_count == 0
        or errors_pointing_to(env, NO_DEVICE)
        or has_error(env, "cuda-101")
        or (t.is_available is False and not t.is_cpu_build and not _other_rung1_errors(env))
    )
    if not no_device or gpu_presence(env) == "none":
        return None
    listed = [str(d.index) for d in nvidia_devices(env)]
    absent = [e for e in entries if e.isdigit() and e not in listed]
    if absent and listed:
        return f"there is no GPU {', '.join(absent)} (the report lists GPU {', '.join(listed)}), so CUDA sees none"
    if gpu_presence(env) == "present":
        return "the GPUs exist, yet CUDA reports no device under this setting"
    return "CUDA reports no device under this setting (an index that does not exist hides every GPU)"


def _other_rung1_errors(env: Environment) -> bool:
    return bool(errors_pointing_to(env, "driver-too-old", "cuda-init-failed", "driver-library-mismatch", NO_DRIVER))


@rule
def cpu_only_build(run: Run) -> Iterator[Finding]:
    env = _env(run)
    if env is None or env.torch.is_cpu_build is not True or env.torch.installed is False:
        return
    if env.host.os_name == "darwin":
        return  # no macOS build of torch has CUDA since 10.14: no-gpu-visible says why, and MPS is the GPU there
    if expected_kind(run) == "xpu":
        return  # the job is for the Intel GPU: a build without CUDA is no fault there, and a CUDA fix would replace it
    presence = gpu_presence(env)
    devices = nvidia_devices(env)
    evidence: Evidence = {
        "torch_version": env.torch.version,
        "torch_cuda": None,
        "evidence": env.torch.cpu_build_evidence,
        "gpu": devices[0].name if devices else None,
        "gpus": len(devices) if devices else None,
        "driver_version": driver_version(env),
        "driver_cuda": driver_cuda(env),
        "conda_cpuonly_installed": env.torch.cpuonly_package,
        "install_method": env.torch.install_method,
        "companions": ", ".join(f"{k} {v}" for k, v in env.torch.companions.items()) or None,
    }
    finding = _finding(
        run,
        "cpu-only-build",
        _cpu_build_title(env, presence),
        evidence,
        cpu_build_fix(env, presence),
        keep_none="torch_cuda",
    )
    if presence == "none":
        finding.severity = Severity.INFO  # with no GPU, a CPU build is not the problem (docs/contract.md)
    elif presence == "unknown" and finding.severity is Severity.CRITICAL and env.source == "probe":
        finding.severity = Severity.WARNING
    yield finding


def _cpu_build_title(env: Environment, presence: str) -> str:
    devices = nvidia_devices(env)
    build = f"torch {env.torch.version}" if env.torch.version else "This torch"
    if presence == "present" and devices:
        return f"{build} was built without CUDA, so it cannot use the {devices[0].name} in this machine"
    if presence == "present":
        return f"{build} was built without CUDA, so it cannot use the NVIDIA GPU in this machine"
    return f"{build} was built without CUDA support"


@rule
def driver_too_old(run: Run) -> Iterator[Finding]:
    env = _env(run)
    if env is None or is_rocm(env) or env.torch.is_cpu_build or has_error(env, "cuda-804"):
        return  # error 804 is named by cuda-init-failed, which says the driver is older than the container's CUDA
    cuda, have, limit = env.torch.cuda_version, driver_version(env), driver_cuda(env)
    said = errors_pointing_to(env, "driver-too-old")
    insufficient = env.torch.init_error_code == 35 or bool(said)
    older_works = _older_cuda_works(run, env)
    if older_works is not None and not insufficient and have is None:
        yield older_works
        return
    if not insufficient and (cuda is None or have is None or limit is None or cuda_at_most(cuda, limit)):
        return
    need = min_driver_for(cuda, env.host.os_name) if cuda else None
    floor = compat_min_driver_for(cuda, env.host.os_name) if cuda else None
    # torch's own is_available() False is the report's word that it does not run: "it runs through minor version
    # compatibility" would contradict it (trial 12: UNDERUSED beside a pasted False)
    works_by_minor_compat = (
        bool(have and floor and version_tuple(have) >= version_tuple(floor))
        and not insufficient
        and env.torch.is_available is not False
    )
    evidence: Evidence = {
        "driver_version": have,
        "driver_cuda": limit,
        "torch_cuda": cuda,
        "torch_cuda_from": env.torch.cuda_version_inferred_from,
        "min_driver_for_torch_cuda": need,
        "cuda_error": 35 if env.torch.init_error_code == 35 else None,
        "message": said[0].text if said else None,
    }
    finding = _finding(
        run, "driver-too-old", _driver_title(env, cuda, have, limit, need), evidence, driver_fix(env, need)
    )
    kernel = old_wsl_kernel(env) if env.host.wsl else None
    if kernel is not None:
        # under WSL 2 the driver is the Windows one, reached through WSL's kernel: one older than GPU access
        # answers CUDA's device query with errors of its own (35 in trial 10's deviceQuery), and a pip
        # reinstall inside WSL changes nothing
        finding.title += f"; and WSL 2's kernel {kernel} predates GPU access ({WSL_GPU_KERNEL}), the first to update"
        finding.evidence["wsl_kernel"] = kernel
        finding.fix = _wsl_fix(env) + f"\n# still failing: upgrade the Windows NVIDIA driver to {need or 'a newer one'}"
    if works_by_minor_compat and finding.severity is Severity.CRITICAL:
        # CUDA >= 11 runs on an older driver of the same major version, except PTX JIT: a real risk, not a stop.
        finding.severity = Severity.WARNING
        finding.title += "; it runs through CUDA minor version compatibility, but PTX JIT kernels will fail"
        if env.torch.is_available is True:
            _works_by_minor_compat(env, finding, have, need)
    yield finding


def _works_by_minor_compat(env: Environment, finding: Finding, have: str | None, need: str | None) -> None:
    """The report shows torch reaching the GPU on a driver below its CUDA's own minimum, within the same major version
    (a T4 on 510 with a cu118 build): minor version compatibility at work, the set-up the datacenter drivers of each
    branch are meant for. Only PTX JIT needs the newer driver, and only where the build has no compiled kernels for
    the GPU: with them, nothing is wrong (trial 10: two working environments were UNDERUSED, and told to reinstall
    the build they had)."""
    archs = _cubins(build_arch_list(env))
    capabilities = [d.compute_capability for d in nvidia_devices(env)]
    if not archs or not capabilities or None in capabilities:
        return  # whether this GPU needs PTX JIT is not known: the warning stands
    if not all(arch_supports(archs, cc) for cc in capabilities if cc is not None):
        return
    finding.severity = Severity.INFO
    gpus = ", ".join(sorted({f"{d.name} ({sm_name(d.compute_capability or '')})" for d in nvidia_devices(env)}))
    finding.title = (
        f"The NVIDIA driver {have} is older than CUDA {env.torch.cuda_version} asks for (>= {need}), and torch reaches "
        f"the GPU through CUDA minor version compatibility: the build has compiled kernels for the {gpus}, so "
        "nothing needs PTX JIT"
    )
    finding.fix = (
        "# nothing to change for this build\n"
        f"# upgrade the driver to >= {need} only for code that JIT-compiles PTX on this GPU (a CUDA extension built\n"
        "# for another arch, a kernel that fails with 'the provided PTX was compiled with an unsupported toolchain')"
    )


def _older_cuda_works(run: Run, env: Environment) -> Finding | None:
    """Two sessions on one machine: a torch built with an older CUDA reaches the GPU, one built with a newer CUDA
    answers is_available() False. The driver is there and works; it is older than the newer CUDA needs (pytorch#28195:
    1.0 with CUDA 9.0 True, 1.2 with CUDA 10.0 False)."""
    t = env.torch
    old, new = t.cuda_elsewhere, t.cuda_version
    if t.is_available is not False or t.is_cpu_build or not old or not new:
        return None
    if runs_on_driver(new, old) is not None:
        return None  # a driver that runs the older CUDA runs the newer too (minor version compatibility): not it
    need = min_driver_for(new, env.host.os_name)
    needs = f" (it needs >= {need})" if need else ""
    newer, older = release_of(new), release_of(old)
    title = (
        f"The NVIDIA driver is too old for CUDA {newer}{needs}: torch {t.available_elsewhere} built with CUDA {older} "
        f"reaches the GPU in this report, torch {t.version} built with CUDA {newer} does not"
    )
    evidence: Evidence = {
        "torch_cuda": new,
        "working_torch": t.available_elsewhere,
        "working_torch_cuda": old,
        "min_driver_for_torch_cuda": need,
    }
    # the driver's own CUDA is not known (between the two), so no build is named for it but the one that works
    target = f">= {need}" if need else f"one for CUDA {newer}"
    fix = (
        f"# upgrade the NVIDIA driver to {target} (https://www.nvidia.com/Download/index.aspx): then torch "
        f"{t.version} reaches the GPU\n"
        "nvidia-smi   # 'Driver Version' before and after\n"
        f"# or keep this driver, and the build that works on it: torch {t.available_elsewhere} (CUDA {older})"
    )
    return _finding(run, "driver-too-old", title, evidence, fix)


def _driver_title(env: Environment, cuda: str | None, have: str | None, limit: str | None, need: str | None) -> str:
    driver = f"The NVIDIA driver{_space(have)}" + (f" (CUDA {limit})" if limit and not have else "")
    if cuda is None:
        return f"{driver} is too old for the CUDA this torch build needs"
    what = (
        "the container image needs"
        if env.torch.cuda_version_inferred_from == "the container image's CUDA requirement"
        else f"torch{_space(env.torch.version)} was built with"
    )
    needs = f" (it needs >= {need})" if need else ""
    return f"{driver} is too old for CUDA {cuda}, which {what}{needs}"


def _space(value: str | None) -> str:
    return f" {value}" if value else ""


@rule
def arch_not_supported(run: Run) -> Iterator[Finding]:
    env = _env(run)
    if env is None:
        return
    hip = next((e for e in errors_pointing_to(env, "arch-not-supported") if e.key == "hip-no-binary"), None)
    if hip is not None:  # ROCm's own "no kernels for this GPU": AMD's gfx targets, not NVIDIA's sm_XY
        sig = signature(hip.key)
        said: Evidence = {"message": hip.text, "torch_version": env.torch.version}
        error_name = " (hipErrorNoBinaryForGpu)" if "nobinaryforgpu" in hip.text.lower() else ""
        title = f"The ROCm build of torch has no code objects for this AMD GPU{error_name}"
        yield _finding(run, "arch-not-supported", title, said, sig.fix if sig else "", nvidia=False)
        return
    if is_rocm(env) or env.torch.is_cpu_build:
        return
    archs = build_arch_list(env)
    named = False
    for device in nvidia_devices(env):
        cc = device.compute_capability
        if cc is None or not _unsupported(env, device.unsupported_by_torch, cc, archs):
            continue
        named = True
        sm = sm_name(cc)
        found = next(iter(arch_builds(cc, env)), None)
        evidence: Evidence = {
            "gpu": device.name,
            "compute_capability": cc,
            "build_arch_list": " ".join(archs) if archs else None,
            "build_arch_list_from": _arch_list_source(env, archs),
            "min_capability": env.torch.min_capability,
            "torch_version": env.torch.version,
            "torch_cuda": env.torch.cuda_version,
            "build_with_kernels": f"torch {found.release} + CUDA {found.cuda}" if found else None,
        }
        yield _finding(
            run,
            "arch-not-supported",
            f"This torch build has no kernels for the {device.name} (compute capability {cc}, {sm})",
            evidence,
            arch_fix(env, cc),
        )
    no_image = next(iter(errors_pointing_to(env, "arch-not-supported")), None)
    if not named and no_image is not None:
        yield _no_kernel_image(run, env, no_image.text, archs, no_image.package)
    elif not named and not nvidia_devices(env) and env.torch.is_available is not True:
        yield from _too_new_for_the_build(run, env, archs)
        yield from _too_old_for_any_recent_build(run, env)


def _arch_list_source(env: Environment, archs: list[str] | None) -> str | None:
    """Where the arch list shown comes from: what this torch printed, or the published list of its release (a value
    of the tables is no fact of the paste, and says so)."""
    if not archs:
        return None
    return "torch" if env.torch.arch_list else "the release's published arch list (not in the text)"


def _cubins(archs: list[str] | None) -> list[str]:
    """The compiled kernels of an arch list (sm_XY), without its PTX (compute_XY), which torch does not count."""
    return [a for a in archs or [] if a.startswith("sm_")]


def _too_new_for_the_build(run: Run, env: Environment, archs: list[str] | None) -> Iterator[Finding]:
    """A GPU named in the text ("**GPU**: RTX 5090", a title) whose kernels the torch build lacks: its published arch
    list has no cubin for it, or its release predates every build for the GPU's generation (2.2 and an sm_120)."""
    version = env.torch.version
    cubins = _cubins(archs)
    if not version:
        return
    for named in env.host.gpus_named:
        cc = capability_of(named)
        lacks = cc is not None and (not arch_supports(cubins, cc) if cubins else release_predates(version, cc))
        if cc is None or not lacks:
            continue
        found = next(iter(arch_builds(cc, env)), None)
        evidence: Evidence = {
            "gpu": f"{named} (named in the text)",
            "compute_capability": cc,
            "build_arch_list": " ".join(cubins) if cubins else None,
            "build_arch_list_from": _arch_list_source(env, cubins),
            "torch_version": version,
            "torch_cuda": env.torch.cuda_version,
            "build_with_kernels": f"torch {found.release} + CUDA {found.cuda}" if found else None,
        }
        title = f"This torch build ({version}) has no kernels for the {named} (compute capability {cc}, {sm_name(cc)})"
        yield _finding(run, "arch-not-supported", title, evidence, arch_fix(env, cc))
        return


# A GPU named in prose whose kernels no PyTorch build after this release has (a Kepler GT 740M, sm_30: 1.3 was the
# last): whatever torch the reporter has, unless it is that old, it cannot use the GPU.
_LAST_BUILDS_BEFORE = (1, 8)


def _too_old_for_any_recent_build(run: Run, env: Environment) -> Iterator[Finding]:
    if env.torch.version and version_tuple(env.torch.version)[:2] < _LAST_BUILDS_BEFORE:
        return  # an old torch may have the kernels: the rule above judges its arch list
    for named in env.host.gpus_named:
        cc = capability_of(named)
        builds = arch_builds(cc, env) if cc else []
        last = max((b.release for b in builds), key=version_tuple, default=None)
        if cc is None or last is None or version_tuple(last)[:2] >= _LAST_BUILDS_BEFORE:
            continue
        evidence: Evidence = {
            "gpu": f"{named} (named in the text)",
            "compute_capability": cc,
            "torch_version": env.torch.version,
            "build_with_kernels": f"torch {last} or older",
        }
        title = (
            f"The {named} (compute capability {cc}, {sm_name(cc)}) has kernels in no PyTorch build after {last}: a "
            "current torch cannot use it"
        )
        yield _finding(run, "arch-not-supported", title, evidence, arch_fix(env, cc))
        return


def _no_kernel_image(
    run: Run, env: Environment, message: str, archs: list[str] | None, package: str | None = None
) -> Finding:
    """ "no kernel image is available" with no GPU listed: the GPU the reporter names ("my RTX 5090") gives its
    compute capability, and the fix its build, unless the build's own arch list has it (a compiled extension then
    lacks it). Several GPUs named and the build's list not known: each is a suspect, and the check tells."""
    cubins = _cubins(archs)
    suspects = _named_without_kernels(env, cubins)
    if len(suspects) > 1:
        return _no_kernel_image_for_one_of(run, env, message, suspects)
    named = next(iter(suspects), None) or env.host.jetson  # a Jetson names its integrated GPU ("Jetson orin": sm_87)
    cc = capability_of(named) if named else None
    if cc is not None and cubins and arch_supports(cubins, cc):
        cc = None
    evidence: Evidence = {"message": message, "cuda_error": 209, "torch_version": env.torch.version}
    if package is not None:
        return _package_without_kernels(run, env, evidence, package, named=named, cc=cc)
    if named is None or cc is None:
        title = "The build (or a compiled extension) has no kernels for this GPU: no kernel image is available"
        return _finding(run, "arch-not-supported", title, evidence, arch_fix(env, None))
    sm = sm_name(cc)
    evidence.update({"gpu": f"{named} (named in the text)", "compute_capability": cc})
    title = (
        f"No kernel image for the {named} the report names (compute capability {cc}, {sm}): the torch build, or a "
        f"compiled extension, lacks {sm}"
    )
    check = f"{_ARCH_LIST}   # {sm} missing: install the build below; listed: rebuild the extension for it"
    others = [n for n in env.host.gpus_named if n != named and _has_kernels(n, cubins)]
    if others:  # the other GPUs the report names have kernels: hiding this one is the fix that keeps the build
        evidence["gpus_with_kernels"] = others
        check = f"{_hide_gpus(named, others)}\n# or, to use the {named} too: a build with {sm} kernels"
    return _finding(run, "arch-not-supported", title, evidence, f"{check}\n{arch_fix(env, cc)}")


def _package_without_kernels(
    run: Run, env: Environment, evidence: Evidence, package: str, *, named: str | None, cc: str | None
) -> Finding:
    """ "no kernel image" raised in another package's code (its traceback ends in site-packages/cpm_kernels): that
    package's own compiled kernels lack the GPU's arch, and torch's build is a suspect only if its list lacks it too."""
    sm = sm_name(cc) if cc else "this GPU's sm_XY"
    gpu = f" for the {named} ({sm})" if named and cc else ""
    evidence.update({"raised_in": package, "gpu": named, "compute_capability": cc})
    title = (
        f"No kernel image{gpu} in {package}: the error is raised in its code, so its own compiled kernels lack "
        f"{sm}; torch's build is at fault only if its arch list lacks it too"
    )
    fix = (
        f"{_ARCH_LIST}   # {sm} listed: torch has its kernels, and only {package} lacks them\n"
        f"python -m pip show {package}   # then: a release of {package} built for {sm} (its docs give the GPUs it "
        "supports), a source build of it for this GPU, or a GPU it supports\n"
        f"# only if {sm} is missing from torch's list too:\n{arch_fix(env, cc)}"
    )
    return _finding(run, "arch-not-supported", title, evidence, fix)


_ARCH_LIST = 'python -c "import torch; print(torch.cuda.get_arch_list())"'
_EACH_CAPABILITY = (  # in PCI order: the indices CUDA_VISIBLE_DEVICES takes below
    'CUDA_DEVICE_ORDER=PCI_BUS_ID python -c "import torch; print(torch.cuda.get_arch_list()); '
    "[print(i, torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i)) "
    'for i in range(torch.cuda.device_count())]"'
)


def _hide_gpus(hidden: str, others: list[str]) -> str:
    return (
        f"export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=<indices of the {', '.join(others)} in "
        f"nvidia-smi>   # hides the {hidden}: torch runs on the others"
    )


def _no_kernel_image_for_one_of(run: Run, env: Environment, message: str, suspects: list[str]) -> Finding:
    """Several GPUs named, and which one the build lacks is not known (its arch list is not): name them all, the
    check that tells, the hiding of the one that lacks kernels, and the build that has kernels for every one (the
    fewest builds have the hardest one's)."""
    named = [(n, cc) for n in suspects if (cc := capability_of(n))]
    hardest = min(named, key=lambda pair: (len(arch_builds(pair[1], env)), pair[1]))
    listed = ", ".join(f"{n} ({sm_name(cc)})" for n, cc in named)
    evidence: Evidence = {"message": message, "cuda_error": 209, "torch_version": env.torch.version,
                          "gpus_named": [n for n, _ in named]}  # fmt: skip
    title = (
        f"No kernel image for one of the GPUs the report names ({listed}): the torch build, or a compiled extension, "
        "lacks its sm_XY"
    )
    fix = (
        f"{_EACH_CAPABILITY}\n"
        "# a GPU whose sm_XY is missing from the arch list lacks kernels: hide it, torch runs on the others:\n"
        "export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=<the indices printed of the others>\n"
        f"# or install a build with every one's kernels (the {hardest[0]}'s {sm_name(hardest[1])} is the rarest):\n"
        f"{arch_fix(env, hardest[1])}"
    )
    return _finding(run, "arch-not-supported", title, evidence, fix)


def _has_kernels(name: str, cubins: list[str]) -> bool:
    cc = capability_of(name)
    return bool(cc and cubins and arch_supports(cubins, cc))


def _named_without_kernels(env: Environment, cubins: list[str]) -> list[str]:
    """The GPUs the report names that may lack kernels: those the build's known arch list lacks ("a K80 and two
    K40c" with a list from sm_37: the K40c), else every one named with a known compute capability (distinct ones)."""
    names = env.host.gpus_named or ([env.host.gpu_named] if env.host.gpu_named else [])
    known = [n for n in names if capability_of(n)]
    if cubins:
        lacking = [n for n in known if not arch_supports(cubins, capability_of(n) or "")]
        return lacking[:1] or names[:1]
    distinct = {capability_of(n) for n in known}
    return known if len(distinct) > 1 else names[:1]


def _unsupported(env: Environment, torch_said: bool | None, cc: str, archs: list[str] | None) -> bool:
    if torch_said:
        return True
    minimum = env.torch.min_capability
    if minimum and version_tuple(cc) < version_tuple(minimum):
        return True
    cubins = _cubins(archs)
    return bool(cubins) and not arch_supports(cubins, cc)


@rule
def cuda_init_failed(run: Run) -> Iterator[Finding]:
    env = _env(run)
    if env is None:
        return
    t = env.torch
    if t.init_conflict:
        yield _init_conflict(run, env)
        return
    if any(d.error for d in env.driver.devices):
        return  # lost_gpu names a GPU that fell off the bus
    seen = next(iter(errors_pointing_to(env, "cuda-init-failed", NO_DEVICE)), None)
    code = seen.cuda_error if seen is not None else t.init_error_code
    hung = bool(t.init_warning and "did not finish within" in t.init_warning)
    if (code is None and not hung and seen is None) or (hung and gpu_presence(env) == "none"):
        return  # a slow torch import on a machine without a GPU is not a CUDA hang
    if code in (35, 209) or (seen is not None and seen.finding == NO_DEVICE and code not in (*NO_DEVICE_ERRORS, 101)):
        return  # driver-too-old and arch-not-supported name these
    hidden = parse_visible_devices(env) is not None
    # under WSL 2 the GPU is the Windows driver's, which no Linux listing shows: "no device" there is WSL's path to it
    unseen = gpu_presence(env) != "present" and not (env.host.wsl and gpu_presence(env) != "none")
    if (code in NO_DEVICE_ERRORS and (hidden or unseen)) or (code == 101 and hidden):
        return  # CUDA_VISIBLE_DEVICES or the absence of any GPU explains "no device"
    sig = signature(seen.key) if seen is not None else None
    known = CUDA_ERRORS.get(code) if code is not None else None
    meaning = sig.meaning if sig else (known.meaning if known else "CUDA did not answer; the driver is stuck")
    fix = sig.fix if sig else (known.fix if known else "sudo dmesg | grep -i xid   # then reboot")
    name = f"error {code} ({known.name})" if known else (f"error {code}" if code is not None else None)
    name = name or ("a hang" if hung else "an internal assertion")
    if code == 46 and "Exclusive_Process" not in (_compute_modes(env) or ""):
        meaning, fix = _busy_meaning(env)
    if code in NO_DEVICE_ERRORS and t.is_available is True:
        # the same machine's torch reached the GPU (a bare `python`, another repo): the job's own process hides it
        fix = (
            "# torch reaches the GPU elsewhere in this report, so the machine is fine: the failing job's own process "
            "hides it,\n# most often with CUDA_VISIBLE_DEVICES set by its script, config or launcher:\n"
            "grep -rni cuda_visible_devices .   # in the project and its configs: set it to 0, or remove it\n" + fix
        )
    evidence: Evidence = {
        "cuda_error": code,
        "error_name": known.name if known else None,
        "message": seen.text if seen is not None else t.init_warning,
        "compute_mode": _compute_modes(env) if code == 46 else None,
        "driver_cuda": driver_cuda(env) if code == 804 else None,
        "torch_cuda": t.cuda_version if code == 804 else None,
        "source": sig.source if sig else None,
    }
    if code == 804 and env.host.in_container is not True and not env.host.wsl:
        # outside a container there is no compat package to blame first: the driver's user-space library was
        # updated (an apt upgrade) while the old kernel module stays loaded until a reboot
        meaning = (
            "outside a container this is the NVIDIA driver's user-space library (libcuda) newer than the kernel "
            "module still loaded: a driver update without a reboot, or a cuda-compat library on LD_LIBRARY_PATH"
        )
        fix = (
            "cat /proc/driver/nvidia/version; nvidia-smi   # the module loaded, and the library's version\n"
            f"{_REBOOT_OR_RELOAD}\n"
            "echo $LD_LIBRARY_PATH   # still failing: take out any .../cuda/compat folder (for data-centre GPUs)\n"
            "# in a container: use an image built for the host driver's CUDA (nvidia-smi on the host)"
        )
    mig = [d.index for d in nvidia_devices(env) if d.mig_mode]
    if mig and seen is not None and seen.key == "num-gpus-assert":
        evidence["mig_enabled_gpus"] = mig
        meaning = f"MIG mode is on (GPU {', '.join(map(str, mig))}), and CUDA opens one MIG instance per process"
    if env.host.wsl and code not in (101, 802, 804) and t.is_available is not True:
        # WSL 2 has no compute modes, no fabric of its own and no Linux driver: its CUDA is the Windows driver's
        # (through /usr/lib/wsl/lib), so the Linux fixes above do not apply and can break it. Error 101 is the job's
        # own device index (cuda:6 on a one-GPU machine), wherever it runs.
        meaning, fix = _wsl_meaning(code, env), _wsl_gpu_fix(code, env)
        evidence["wsl"] = env.host.wsl_version or True
        evidence["source"] = None  # the signature's thread is a Linux machine's
    yield _finding(run, "cuda-init-failed", f"CUDA fails to initialise with {name}: {meaning}", evidence, fix)


def _wsl_meaning(code: int | None, env: Environment) -> str:
    several = len(nvidia_devices(env)) > 1 or env.torch.device_count not in (None, 0, 1)
    if code == 2 and several:
        return "under WSL 2, CUDA fails to enumerate several GPUs at once (a known WSL issue), not a full memory"
    if code in NO_DEVICE_ERRORS:
        return (
            "under WSL 2, CUDA finds no device when the libcuda it loads is not the Windows driver's "
            "(/usr/lib/wsl/lib), or when the Windows driver or WSL has no GPU support"
        )
    return "under WSL 2 this comes from the Windows side: the Windows NVIDIA driver, WSL's kernel or the Windows build"


def _wsl_gpu_fix(code: int | None, env: Environment) -> str:
    """WSL 2's own path to the GPU: the Windows driver and WSL itself, never a Linux driver."""
    lines = []
    if code == 2:
        lines.append('CUDA_VISIBLE_DEVICES=0 python -c "import torch; print(torch.cuda.is_available())"   # one GPU')
    if code in NO_DEVICE_ERRORS:  # most often a Linux driver's libcuda, installed inside WSL, found before WSL's own
        lines += [
            "ldconfig -p | grep 'libcuda.so'   # only /usr/lib/wsl/lib may provide it inside WSL 2",
            "# another path there (a Linux driver or cuda-drivers installed inside WSL): remove that package, keep "
            "cuda-toolkit-XX-Y",
        ]
    lines += [
        "# WSL 2 reaches the GPU through the Windows NVIDIA driver: install no Linux NVIDIA driver inside WSL",
        "# in Windows (PowerShell): update WSL and its kernel, and restart it",
        "wsl --update",
        "wsl --shutdown",
        "# then update the Windows NVIDIA driver; an Insider build of Windows can break GPU access in WSL: update it",
        "ls /usr/lib/wsl/lib/libcuda.so* && nvidia-smi   # inside WSL 2: the Windows driver's library, and the GPU",
    ]
    return "\n".join(lines)


def _busy_meaning(env: Environment) -> tuple[str, str]:
    """Error 46 without an exclusive compute mode shown: Exclusive-Process is one cause among several (a broken or
    half-finished driver install, a GPU held by a VM or stuck after suspend), and on Windows not a mode a GeForce or
    WDDM card has; the check tells them apart."""
    told = _compute_modes(env)
    mode = f"nvidia-smi shows compute mode {told}, so it is not an exclusive mode: " if told else ""
    meaning = (
        f"{mode}another process holds GPUs in Exclusive-Process compute mode, or the NVIDIA driver is broken or "
        "half-installed (an update without a reboot, a failed install), or the GPU is held by a virtual machine or "
        "stuck after a suspend"
    )
    if env.host.os_name == "windows":
        return meaning, (
            "nvidia-smi   # lists the GPU? then reinstall the NVIDIA driver (its installer's clean installation) "
            "and restart Windows"
        )
    return meaning, (
        "nvidia-smi -q -d COMPUTE   # Exclusive_Process: stop the other process, or sudo nvidia-smi -c DEFAULT\n"
        "# Default: the driver: sudo dmesg | grep -i nvrm, then reinstall the driver and reboot"
    )


def _compute_modes(env: Environment) -> str | None:
    modes = sorted({d.compute_mode for d in env.driver.devices if d.compute_mode})
    return ", ".join(modes) or None


def _init_conflict(run: Run, env: Environment) -> Finding:
    other = env.torch.init_conflict
    return _finding(
        run,
        "cuda-init-failed",
        f"torch cannot initialise the GPU after {other} initialised it first in the same process",
        {"initialised_first_by": other, "available_without_it": env.torch.is_available, **_common_evidence(env)},
        f"import torch; torch.cuda.init()   # before the first {other} call, or use {other} in another process",
        nvidia=False,
    )


@rule
def lost_gpu(run: Run) -> Iterator[Finding]:
    """A GPU NVML calls lost, at the environment probe or while sampled (`watch`, the run's sampler): whatever else
    was measured, it cannot be used."""
    env = _env(run)
    found = [(str(d.index), d.pci_bus_id or d.name, d.error) for d in (env.driver.devices if env else [])]
    lost = [(i, name, error) for i, name, error in found if error and "lost" in error.lower()]
    total = len(found)
    if not lost and run.gpu is not None:
        tracks = run.gpu.devices
        lost = [(str(t.index), t.name or f"GPU {t.index}", t.error or "GPU is lost") for t in tracks if t.lost]
        total = len(tracks)
    if not lost:
        return
    evidence: Evidence = {
        "lost_gpus": ", ".join(f"{index} ({name})" for index, name, _ in lost),
        "gpus": total,
        "nvml_error": lost[0][2],
    }
    finding = _finding(
        run,
        "cuda-init-failed",
        f"{len(lost)} of {total} GPUs fell off the bus (NVML: GPU is lost) and cannot be used",
        evidence,
        "sudo dmesg | grep -i 'xid'   # Xid 79 = fell off the bus; then reboot (power, cooling or PCIe link issue)",
    )
    if len(lost) < total and finding.severity is Severity.CRITICAL:
        finding.severity = Severity.WARNING  # the other GPUs still work
    yield finding


# Registered last on purpose: it speaks only when every more specific rung-1 rule above stayed silent.
_SPECIFIC_RULES = (
    torch_not_installed,
    driver_library_mismatch,
    container_without_gpu,
    driver_not_loaded,
    no_gpu_visible,
    visible_devices_hide_gpus,
    cpu_only_build,
    driver_too_old,
    arch_not_supported,
    cuda_init_failed,
    lost_gpu,
)


@rule
def cuda_unavailable_unexplained(run: Run) -> Iterator[Finding]:
    """torch says CUDA is not available while NVIDIA GPUs are there, and no known cause is in the evidence.

    A demanding user must never read "healthy" here: the GPU is unusable. We say what we could not tell and how to
    make torch name the error itself, rather than guess a cause.
    """
    env = _env(run)
    if env is None or not nvidia_expected(run) or is_rocm(env):
        return
    t = env.torch
    said = [e for e in env.errors if e.finding not in (None, INTEL_XPU)] if env.source == "text" else []
    unavailable = t.is_available is False and not t.is_cpu_build and gpu_presence(env) == "present"
    if unavailable and env.host.jetson and not (t.version or t.cuda_version):
        unavailable = False  # on a Jetson the build decides (NVIDIA's or PyPI's CPU wheel): ask for it, not a guess
    if not (unavailable or said):
        return
    if any(f.severity is not Severity.INFO for r in _SPECIFIC_RULES for f in r(run)):
        return
    if not unavailable:  # an error text of the catalogue that no specific rule could place: name it, never "healthy"
        sig = signature(said[0].key)
        yield _finding(
            run,
            "cuda-init-failed",
            f"The report shows an error that stops CUDA: {sig.meaning if sig else said[0].text}",
            {"message": said[0].text, "cuda_error": said[0].cuda_error, "source": sig.source if sig else None},
            sig.fix if sig else "python -m torch.utils.collect_env   # then: gputriage env --from that output",
        )
        return
    if t.available_elsewhere is not None:
        yield _available_elsewhere(run, env)
        return
    devices = nvidia_devices(env)
    evidence: Evidence = {
        "torch_version": t.version,
        "torch_cuda": t.cuda_version,
        "torch_is_available": False,
        "gpus": len(devices) or None,
        "gpu_names": sorted({d.name for d in devices}) or None,
        "driver_version": driver_version(env),
        "init_message": t.init_warning,
    }
    yield _finding(
        run,
        "cuda-init-failed",
        "torch reports CUDA as not available although NVIDIA GPUs are present, and the evidence does not say why",
        evidence,
        'python -c "import torch; torch.cuda.init()"   # makes torch raise the CUDA error it hid\n'
        "nvidia-smi   # the driver's own view; then run: gputriage env",
    )


_SLURM_STEP = re.compile(r"^[$ \t]*(srun|salloc)\b(?![^|;&]*--(?:gres|gpus))[ \t]+")
_WHICH_PYTHON = 'python -c "import sys, torch; print(sys.executable, torch.__version__, torch.cuda.is_available())"'


def _available_elsewhere(run: Run, env: Environment) -> Finding:
    """One report, two answers: a torch in it (collect_env's, another session's) answers is_available() True, and
    the failing run answers False with no error. The machine and its driver work; the False comes from another
    interpreter or environment (a notebook kernel, an IDE's Python, another venv or conda env)."""
    t = env.torch
    working = t.available_elsewhere if t.available_elsewhere != "unknown" else None
    evidence: Evidence = {
        "torch_version": t.version if t.version != working else None,  # the failing one's is not known
        "torch_is_available": False,
        "available_elsewhere": working or True,
        "gpu_names": sorted({d.name for d in nvidia_devices(env)}) or None,
        "driver_version": driver_version(env),
    }
    which = f"torch {working}" if working else "a torch"
    fix = (
        f"{_WHICH_PYTHON}   # run it where the job fails (the notebook, the IDE, the venv), and where it works\n"
        "# then run the job with the interpreter that answers True (or install that torch build in the other one)"
    )
    failing = t.unavailable_command or ""
    if _SLURM_STEP.match(failing):
        evidence["failing_command"] = failing
        asking = _SLURM_STEP.sub(r"\1 --gres=gpu:1 ", failing, count=1)
        fix = (
            "# the False came from a Slurm job step, which gets a GPU only when it asks for one:\n"
            f"{asking}   # or --gpus=1; in a batch script: #SBATCH --gres=gpu:1\n{fix}"
        )
    title = (
        f"CUDA is not available where the job ran, while {which} in the same report reaches the GPU: the job runs "
        "in another interpreter or environment"
    )
    return _finding(run, "cuda-init-failed", title, evidence, fix)
