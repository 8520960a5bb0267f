"""Pure helpers for the rung-1 rules: what the environment facts add up to, and the exact install commands.

No I/O and no torch: everything here reads the Environment section and the tables in `gputriage.data.cuda_tables`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gputriage.data.cuda_tables import (
    ARCH_LISTS,
    TORCH_RELEASES,
    arch_list_for,
    arch_supports,
    compat_min_driver_for,
    cuda_supported_by_driver,
    min_driver_for,
    release_of,
    version_tuple,
)
from gputriage.hardware.visible import NvmlIdentity, map_visible
from gputriage.record import Run
from gputriage.record.device import judged_device, judged_for_nvidia
from gputriage.record.environment import Environment, GpuDevice

WHEEL_INDEX = "https://download.pytorch.org/whl"
_NVIDIA_NODE_RE = re.compile(r"^/dev/nvidia\d+$")
MINOR_COMPAT_SINCE = 11  # CUDA minor version compatibility exists from CUDA 11 on
_PIP_INDEX_SINCE = (2, 0)  # from 2.0 the pages show `--index-url .../cuXYZ`; before, `+cuXYZ -f torch_stable.html`
_NON_NVIDIA_NAME = re.compile(r"^(AMD|Radeon|Intel)\b|\bgfx\d", re.IGNORECASE)


# --- which device the job is judged for -----------------------------------------------------------------------------
def expected_kind(run: Run) -> str:
    """The device kind rung 1 is judged for (record.device.judged_device); "cuda" when nothing tells."""
    return judged_device(run) or "cuda"


def nvidia_expected(run: Run) -> bool:
    """False when the job is meant for meta / mps / xpu / cpu: NVIDIA-specific findings are then only info."""
    return judged_for_nvidia(run)


# --- what the facts add up to ---------------------------------------------------------------------------------------
def is_rocm(env: Environment) -> bool:
    return bool(env.torch.hip_version)


def nvidia_devices(env: Environment) -> list[GpuDevice]:
    return [d for d in env.driver.devices if not _NON_NVIDIA_NAME.search(d.name)]


def nvidia_nodes(env: Environment) -> list[str]:
    return [n for n in env.host.dev_nodes or [] if _NVIDIA_NODE_RE.match(n)]


def gpu_presence(env: Environment) -> str:
    """ "present" | "none" | "unknown": whether an NVIDIA GPU exists at all, told positively, never guessed."""
    torch_sees = bool(env.torch.device_count) and not is_rocm(env)
    if (
        nvidia_devices(env)
        or (env.host.pci_nvidia_devices or 0) > 0
        or nvidia_nodes(env)
        or env.host.proc_driver_version
        or torch_sees
    ):
        return "present"
    if env.driver.no_devices_reported:
        return "none"
    if env.source == "probe" and "/dev/dxg" not in (env.host.dev_nodes or []):
        # The probe looked everywhere: NVML, /dev, /proc/driver/nvidia, the PCI bus and torch found nothing.
        return "none"
    return "unknown"


def driver_version(env: Environment) -> str | None:
    return env.driver.driver_version or env.host.proc_driver_version


def driver_cuda(env: Environment) -> str | None:
    """The highest CUDA the driver supports: NVML's answer, or the release-notes table applied to its version."""
    if env.driver.cuda_driver_version:
        return env.driver.cuda_driver_version
    version = driver_version(env)
    return cuda_supported_by_driver(version, env.host.os_name) if version else None


def major_version(version: str) -> int | None:
    """12 for "12.4"; None for a text that does not start with a number (a record can hold anything)."""
    parts = version_tuple(version)
    return parts[0] if parts else None


def cuda_at_most(cuda: str, limit: str) -> bool:
    return version_tuple(cuda)[:2] <= version_tuple(limit)[:2]


def base_version(torch_version: str) -> str:
    """ "1.8.0.dev20201023" / "2.6.0+cu126" -> "1.8.0" / "2.6.0"."""
    return ".".join(str(p) for p in version_tuple(torch_version)[:3])


# --- CUDA_VISIBLE_DEVICES -------------------------------------------------------------------------------------------
@dataclass
class VisibleDevices:
    value: str
    entries: list[str]
    ignored: list[str]  # entries CUDA ignores, with why (only when the GPUs are known)
    visible_count: int | None  # GPUs CUDA will expose; None when the GPUs are unknown


def parse_visible_devices(env: Environment) -> VisibleDevices | None:
    """Apply CUDA's rules to CUDA_VISIBLE_DEVICES (`gputriage.hardware.visible`, shared with the sampler)."""
    value = env.env_vars.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    entries = [e.strip() for e in value.split(",")] if value.strip() else []
    if env.source == "probe" and env.driver.nvml_loaded is True:
        gpus = [NvmlIdentity(d.index, d.uuid, d.name, tuple(d.mig_uuids)) for d in nvidia_devices(env)]
        mapped = map_visible(value, gpus, env.env_vars.get("CUDA_DEVICE_ORDER"))
        return VisibleDevices(value, entries, mapped.ignored, len(mapped.devices))
    # A pasted text lists GPUs only partly (cut tables): only "empty" and "-1" are certain.
    hides_all = not entries or entries[0] == "-1"
    return VisibleDevices(value, entries, [], 0 if hides_all else None)


# --- install commands -----------------------------------------------------------------------------------------------
def pip_install(torch_version: str | None, cuda: str) -> str:
    """The exact pip command for torch `torch_version` (None: the newest) built for CUDA `cuda`."""
    tag = "cu" + "".join(str(p) for p in version_tuple(cuda)[:2])
    if torch_version is None:
        return f"python -m pip install torch --index-url {WHEEL_INDEX}/{tag}"
    base = base_version(torch_version)
    if version_tuple(base) >= _PIP_INDEX_SINCE:
        return f"python -m pip install torch=={base} --index-url {WHEEL_INDEX}/{tag}"
    return f"python -m pip install torch=={base}+{tag} -f {WHEEL_INDEX}/torch_stable.html"


def conda_install(release: str, cuda: str) -> str:
    channels = "-c pytorch -c conda-forge" if (major_version(cuda) or 0) >= 11 else "-c pytorch"
    return f"conda install pytorch=={release}.0 cudatoolkit={cuda} {channels}"


@dataclass
class Variant:
    torch_version: str | None  # None: the newest release on that index
    cuda: str
    minor_compat: bool = False  # newer than the driver's CUDA, runs through CUDA minor version compatibility

    def command(self) -> str:
        return pip_install(self.torch_version, self.cuda)


def runs_on_driver(cuda: str, limit: str | None) -> str | None:
    """ "exact" when the driver's CUDA covers `cuda`, "compat" when only minor version compatibility does, else None."""
    if limit is None or cuda_at_most(cuda, limit):
        return "exact"
    major = major_version(cuda)
    return "compat" if major is not None and major >= MINOR_COMPAT_SINCE and major == major_version(limit) else None


def cuda_variant_for(env: Environment) -> Variant | None:
    """The CUDA build of the user's torch release that the driver and the GPUs support.

    In order: the newest build the driver fully supports; else the oldest one of the driver's CUDA major version
    (minor version compatibility: a driver that reports CUDA 12.4 runs any 12.x build); else the same from older
    releases, newest first.
    """
    limit = driver_cuda(env)
    capabilities = [d.compute_capability for d in nvidia_devices(env) if d.compute_capability]
    version = env.torch.version
    releases = sorted(TORCH_RELEASES, key=version_tuple, reverse=True)
    own = release_of(version) if version else None
    order = ([own] if own in TORCH_RELEASES else []) + [r for r in releases if r != own]
    for release in order:
        usable = [
            cuda
            for cuda in TORCH_RELEASES[release].cuda_variants
            if runs_on_driver(cuda, limit) and _has_kernels_for(release, cuda, capabilities)
        ]
        if not usable:
            continue
        exact = [c for c in usable if runs_on_driver(c, limit) == "exact"]
        cuda = max(exact, key=version_tuple) if exact else min(usable, key=version_tuple)
        pinned = version if release == own and version else (f"{release}.0" if release != releases[0] else None)
        return Variant(pinned, cuda, minor_compat=not exact)
    return None


def _has_kernels_for(release: str, cuda: str, capabilities: list[str]) -> bool:
    archs = ARCH_LISTS.get((release, cuda))
    return archs is None or all(arch_supports(archs, cc) for cc in capabilities)


def arch_variant_for(capability: str, env: Environment) -> tuple[str, str, str] | None:
    """(release, cuda, command) of the newest published build with kernels for `capability` that the driver runs."""
    limit = driver_cuda(env)
    own = release_of(env.torch.version) if env.torch.version else None
    candidates = sorted(ARCH_LISTS, key=lambda k: (k[0] == own, version_tuple(k[0]), version_tuple(k[1])), reverse=True)
    for release, cuda in candidates:
        if limit and not cuda_at_most(cuda, limit):
            continue
        if not arch_supports(ARCH_LISTS[(release, cuda)], capability):
            continue
        # Releases before 2.0 in the table were read from the conda packages; give the command for those packages.
        if version_tuple(release) < _PIP_INDEX_SINCE:
            return release, cuda, conda_install(release, cuda)
        pinned = env.torch.version if release == own and env.torch.version else f"{release}.0"
        return release, cuda, pip_install(pinned, cuda)
    return None


def build_arch_list(env: Environment) -> list[str] | None:
    """The build's arch list: what torch said, else the published list of that release and CUDA variant."""
    if env.torch.arch_list:
        return env.torch.arch_list
    if env.torch.version and env.torch.cuda_version:
        found = arch_list_for(env.torch.version, env.torch.cuda_version)
        return list(found) if found else None
    return None


def driver_needed(cuda: str, env: Environment) -> str:
    """ "NVIDIA driver >= 560.28.03", from the GA table, else the major version's minor-compatibility floor."""
    exact = min_driver_for(cuda, env.host.os_name)
    if exact:
        return f"NVIDIA driver >= {exact}"
    floor = compat_min_driver_for(cuda, env.host.os_name)
    major = major_version(cuda)
    return (
        f"NVIDIA driver >= {floor} (CUDA {major}.x minor version compatibility)" if floor else "a recent NVIDIA driver"
    )
