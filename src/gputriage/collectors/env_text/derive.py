"""What follows from the facts read: the build's CUDA or CPU-ness, and what the text does not tell."""

from __future__ import annotations

import re

from gputriage.collectors.env_text.packages import infer_from_command
from gputriage.data.cuda_tables import TORCH_RELEASES, release_of, version_tuple
from gputriage.data.gpu_names import capability_of
from gputriage.record.environment import Environment

_LOCAL = re.compile(r"\+(cpu|cu([0-9]{1,2})([0-9])|rocm[0-9.]{1,10})")


def derive_build(env: Environment) -> None:
    t = env.torch
    _cpu_version_said(env)
    local = _LOCAL.search(t.version or "")
    if local and local.group(1) == "cpu":
        t.cpu_build_evidence = t.cpu_build_evidence or f"torch {t.version}"
    elif local and local.group(1).startswith("cu"):
        t.cuda_version = t.cuda_version or f"{local.group(2)}.{local.group(3)}"
    elif local:
        t.hip_version = t.hip_version or local.group(1)[4:]
    if t.cpuonly_package:
        t.cpu_build_evidence = t.cpu_build_evidence or "conda's cpuonly package is installed"
    _conflicting_builds(env)
    _jetson_build(env)
    _platform_wheel(env)
    infer_from_command(env)
    if t.cpu_build_evidence:
        t.is_cpu_build = True
        if t.cuda_version_inferred_from:  # a command's intent gives way to what was installed
            t.cuda_version = t.cuda_version_inferred_from = None
    elif t.cuda_version or t.hip_version:
        t.is_cpu_build = False
    else:
        _infer_pypi_wheel(env)
    for device in env.driver.devices:  # nvidia-smi and collect_env name a GPU but not its compute capability
        if device.compute_capability is None:
            device.compute_capability = capability_of(device.name)
    if t.gpu_use_evidence and t.is_available is None:
        t.is_available = True
    if t.is_available is not None and t.installed is None:
        t.installed = True


def _cpu_version_said(env: Environment) -> None:
    """ "It defaults to the [cpu] version" and CUDA does not work: the failing torch is a CPU build; a CUDA build's
    version elsewhere in the text (the reporter's workaround, `--with torch==2.5.1+cu124`) is another state."""
    t = env.torch
    if not t.cpu_version_said or t.is_available is True:
        return
    if _LOCAL.search(t.version or "") and "+cpu" not in (t.version or ""):
        t.other_versions.append(t.version or "")
        t.version, t.cuda_version, t.cuda_version_inferred_from = None, None, None
    t.cpu_build_evidence = t.cpu_build_evidence or f"the report says: {t.cpu_version_said}"


def _conflicting_builds(env: Environment) -> None:
    """The report names a CUDA build and a CPU build of torch ("swapped 2.9.1+cu128 for 2.9.0+cpu", a working env
    next to a broken one) and CUDA does not work: the failing state is the CPU build."""
    t = env.torch
    cpu = next((v for v in t.other_versions if v.endswith("+cpu")), None)
    if cpu is None or t.is_available is True or (t.cpu_build_evidence and not t.cuda_version):
        return
    t.cpu_build_evidence = t.cpu_build_evidence or f"the report names torch {cpu} next to {t.version}"
    t.version, t.cuda_version, t.cuda_version_inferred_from = cpu, None, None


_NV_TAG = re.compile(r"\.nv[0-9]{2}\.[0-9]{1,2}\b")
_CUDA_BUILD_ERRORS = ("driver-too-old", "cuda-init-failed", "arch-not-supported", "no-device")


def _jetson_build(env: Environment) -> None:
    """On a Jetson, torch reaches the GPU only as NVIDIA's own build ("2.0.0a0+...nv23.05", the JetPack wheels) or a
    build made there with CUDA. A plain release number that answers is_available() False, with no sign of a CUDA
    build (its CUDA, a CUDA error that only a CUDA build prints), is PyPI's aarch64 wheel, which is CPU-only."""
    t = env.torch
    if not env.host.jetson or t.is_available is not False or t.cuda_version or t.hip_version:
        return
    if t.cpu_build_evidence or (t.version and (_NV_TAG.search(t.version) or "+" in t.version)):
        return
    if any(e.finding in _CUDA_BUILD_ERRORS for e in env.errors):
        return
    if not t.version and (env.host.in_container or "CUDA_VISIBLE_DEVICES" in env.env_vars):
        return  # a container started without NVIDIA's runtime, or hidden devices, answer False with any build
    # with no version at all, the answer alone says the same: NVIDIA's build on a Jetson reaches its GPU, or fails
    # with a CUDA error that only a CUDA build prints
    named = f"torch {t.version}" if t.version else "The torch installed"
    t.cpu_build_evidence = (
        f"{named} on a Jetson without NVIDIA's build tag (nvYY.MM) answers is_available() False: "
        "PyPI's aarch64 wheels are CPU-only"
    )


def _platform_wheel(env: Environment) -> None:
    """PyPI's torch wheels for Windows and macOS are CPU-only: a plain version from pip there is a CPU build."""
    t = env.torch
    if not (t.version or t.pip_installed_torch) or t.cuda_version or t.cpu_build_evidence:
        return
    if "+" in (t.version or "") or t.install_method == "conda":
        return
    if "download.pytorch.org/whl/cu" in (t.install_command or "") and "extra-index-url" not in (
        t.install_command or ""
    ):
        return
    if env.host.os_name in ("windows", "darwin") and t.install_method == "pip":
        what = f"torch {t.version} from PyPI" if t.version else f"{t.pip_installed_torch}, from PyPI,"
        t.cpu_build_evidence = f"{what} on {env.host.os_name}, where PyPI has only CPU builds"
    elif (
        env.host.machine == "aarch64"
        and t.install_method == "pip"
        and t.version
        and version_tuple(t.version)[:2] <= (2, 9)
    ):
        # pytorch#168065: PyPI's Linux aarch64 wheels are CPU-only; the CUDA ones live on download.pytorch.org
        t.cpu_build_evidence = f"torch {t.version} from PyPI on aarch64, where PyPI has only CPU builds"


def _infer_pypi_wheel(env: Environment) -> None:
    """A plain `pip install torch==X` on Linux got PyPI's default wheel, whose CUDA the release table gives."""
    t = env.torch
    if not t.version or t.install_method != "pip" or "+" in t.version or env.host.os_name not in ("linux", None):
        return
    if env.host.machine == "aarch64" or env.host.jetson:
        return  # the release table's default CUDA wheel is the x86_64 one
    if "index-url" in (t.install_command or ""):
        return
    release = TORCH_RELEASES.get(release_of(t.version))
    if release is not None and release.pypi_cuda:
        t.cuda_version, t.is_cpu_build = release.pypi_cuda, False
        t.cuda_version_inferred_from = f"the default PyPI wheel of torch {t.version} for Linux"


def has_any_fact(env: Environment) -> bool:
    t, d, h = env.torch, env.driver, env.host
    values = (
        t.version, t.installed, t.is_available, t.device_count, t.init_warning, t.init_conflict,
        t.cpu_build_evidence, t.gpu_use_evidence, t.cpu_fallback_evidence, t.install_command, t.cuda_version,
        d.driver_version, d.cuda_driver_version, d.nvml_error, d.no_devices_reported,
        h.in_container, h.pci_nvidia_devices, h.proc_driver_version, h.no_gpu_stated, h.nvidia_smi_missing,
        h.cuda_toolkit_version, h.jetson, h.gpu_named, h.container_evidence, h.macos_version, t.mps_built,
        h.wsl_version, h.wsl_kernel,
    )  # fmt: skip
    return any(v is not None for v in values) or bool(
        d.devices or env.env_vars or env.errors or h.other_gpus or t.other_accelerators
    )


def unknown_facts(env: Environment) -> list[str]:
    """What the text does not tell, as sentences, each with the command whose output would tell it."""
    t, d = env.torch, env.driver
    unknown = []
    if t.version is None:
        unknown.append("could not tell the torch version (python -c 'import torch; print(torch.__version__)')")
    if t.is_cpu_build is None:
        unknown.append(
            "could not tell whether torch was built with CUDA (python -c 'import torch; print(torch.version.cuda)')"
        )
    # a ROCm build (its version, or its own error) runs on AMD GPUs: NVIDIA's driver and tools say nothing of it
    rocm = bool(t.hip_version) or any(e.key == "no-hip-gpu" for e in env.errors)
    if d.driver_version is None and not rocm:
        unknown.append("could not tell the NVIDIA driver version (nvidia-smi)")
    if not d.devices and not d.no_devices_reported:
        unknown.append("could not tell which GPUs the machine has (" + ("rocminfo" if rocm else "nvidia-smi -L") + ")")
    if t.is_available is None:
        unknown.append("could not tell whether torch.cuda.is_available() is True")
    if "CUDA_VISIBLE_DEVICES" not in env.env_vars:
        shown = (
            "echo %CUDA_VISIBLE_DEVICES% in cmd, $env:CUDA_VISIBLE_DEVICES in PowerShell"
            if env.host.os_name == "windows"
            else "echo $CUDA_VISIBLE_DEVICES"
        )
        unknown.append(f"could not tell whether CUDA_VISIBLE_DEVICES was set ({shown})")
    return unknown
