"""The host around torch: device nodes, the kernel driver, the PCI bus, containers, WSL and the env vars that matter.

Everything reads files under `root` (the real "/" by default) so that tests can lay out a fake machine in a temp
folder. Nothing here raises: an unreadable file is a fact left as None.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from gputriage.record.environment import HostFacts

# The variables that hide devices or change CUDA's behaviour; recorded verbatim when set (even when empty: an empty
# CUDA_VISIBLE_DEVICES hides every GPU, which is exactly what must be reported).
ENV_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_LAUNCH_BLOCKING",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "PYTORCH_NVML_BASED_CUDA_CHECK",
    "CUDA_MODULE_LOADING",
)

NVIDIA_PCI_VENDOR = "0x10de"
# PCI class 0x03xxxx is "display controller" (VGA 0x0300, 3D 0x0302): the GPU itself, not its HDMI audio function
# (0x0403) or an NVSwitch bridge (0x0680), which carry the same vendor id.
_DISPLAY_CLASS_PREFIX = "0x03"
_DRIVER_VERSION_RE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)")
_CGROUP_KINDS = (("kubepods", "kubernetes"), ("docker", "docker"), ("libpod", "podman"), ("containerd", "containerd"))
_NVCC_TIMEOUT_S = 5.0


def probe_host(root: Path = Path("/"), environ: Mapping[str, str] | None = None) -> HostFacts:
    """Read the host facts from the files under `root` and the variables in `environ` (os.environ by default)."""
    env = os.environ if environ is None else environ
    facts = HostFacts(
        python_version=platform.python_version(),
        platform=platform.platform(),
        os_name=os_name(sys.platform),
        machine=platform.machine() or None,
        macos_version=(platform.mac_ver()[0] or None) if sys.platform == "darwin" else None,
    )
    facts.dev_nodes = device_nodes(root)
    facts.proc_driver_version = proc_driver_version(root)
    facts.pci_nvidia_devices = pci_nvidia_gpus(root)
    facts.container_kind = container_kind(root, env)
    facts.in_container = facts.container_kind is not None
    facts.wsl = is_wsl(root, env)
    return facts


def os_name(sys_platform: str) -> str:
    if sys_platform.startswith("win"):
        return "windows"
    if sys_platform == "darwin":
        return "darwin"
    return "linux" if sys_platform.startswith("linux") else sys_platform


def read_env_vars(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    return {name: env[name] for name in ENV_VARS if name in env}


def device_nodes(root: Path) -> list[str]:
    """/dev/nvidia* (nvidiactl, nvidia0, nvidia-uvm, ...) and WSL2's /dev/dxg, through which WSL reaches the GPU."""
    dev = root / "dev"
    try:
        names = sorted(p.name for p in dev.iterdir() if p.name.startswith("nvidia") or p.name == "dxg")
    except OSError:
        return []
    return [f"/dev/{name}" for name in names]


def proc_driver_version(root: Path) -> str | None:
    """The loaded kernel module's version from /proc/driver/nvidia/version (present only while it is loaded)."""
    text = _read(root / "proc" / "driver" / "nvidia" / "version")
    if text is None:
        return None
    match = _DRIVER_VERSION_RE.search(text)
    return match.group(1) if match else text.strip().splitlines()[0][:80]


def pci_nvidia_gpus(root: Path) -> int | None:
    """How many NVIDIA display controllers sit on the PCI bus, driver or not; None when sysfs is not readable."""
    devices = root / "sys" / "bus" / "pci" / "devices"
    try:
        entries = list(devices.iterdir())
    except OSError:
        return None
    count = 0
    for entry in entries:
        vendor = _read(entry / "vendor")
        device_class = _read(entry / "class")
        if (
            vendor
            and vendor.strip().lower() == NVIDIA_PCI_VENDOR
            and (device_class or "").startswith(_DISPLAY_CLASS_PREFIX)
        ):
            count += 1
    return count


def container_kind(root: Path, environ: Mapping[str, str]) -> str | None:
    """docker | podman | kubernetes | containerd | the `container` variable's value; None when not in one."""
    if environ.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if (root / ".dockerenv").exists():
        return "docker"
    if (root / "run" / ".containerenv").exists():
        return "podman"
    cgroup = _read(root / "proc" / "1" / "cgroup") or ""
    for marker, kind in _CGROUP_KINDS:
        if marker in cgroup:
            return kind
    # systemd-nspawn, podman and others set `container` in PID 1's environment, which children inherit.
    return environ.get("container") or None


def is_wsl(root: Path, environ: Mapping[str, str]) -> bool:
    if environ.get("WSL_DISTRO_NAME") or environ.get("WSL_INTEROP"):
        return True
    version = _read(root / "proc" / "version") or ""
    return "microsoft" in version.lower()


def nvcc_version(environ: Mapping[str, str] | None = None) -> str | None:
    """The CUDA toolkit's version from `nvcc --version`: informative only, torch ships its own CUDA runtime."""
    env = os.environ if environ is None else environ
    nvcc = shutil.which("nvcc")
    if nvcc is None and env.get("CUDA_HOME"):
        candidate = Path(env["CUDA_HOME"]) / "bin" / "nvcc"
        nvcc = str(candidate) if candidate.exists() else None
    if nvcc is None:
        return None
    try:
        out = subprocess.run(
            [nvcc, "--version"],
            capture_output=True,
            encoding="utf-8",
            errors="replace",
            timeout=_NVCC_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"release (\d+\.\d+)", out.stdout)
    return match.group(1) if match else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")  # /proc and /sys files: ASCII
    except OSError:
        return None
