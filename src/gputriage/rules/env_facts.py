"""Pure helpers for the rung-1 rules: what the environment facts add up to, and the exact install commands.

No I/O and no torch: everything here reads the Environment section and the tables in `gputriage.data.cuda_tables`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import msgspec

from gputriage.data.cuda_tables import (
    ARCH_LISTS,
    TORCH_RELEASES,
    arch_list_for,
    arch_supports,
    companions_of,
    compat_min_driver_for,
    cuda_supported_by_driver,
    min_driver_for,
    release_of,
    version_tuple,
)
from gputriage.data.error_signatures import signature
from gputriage.hardware.visible import NvmlIdentity, map_visible
from gputriage.record import Run
from gputriage.record.device import judged_device, judged_for_nvidia
from gputriage.record.environment import Environment, ErrorSeen, GpuDevice

WHEEL_INDEX = "https://download.pytorch.org/whl"
_NVIDIA_NODE_RE = re.compile(r"^/dev/nvidia\d+$")
MINOR_COMPAT_SINCE = 11  # CUDA minor version compatibility exists from CUDA 11 on
_LOCAL_TAGS_SINCE = (1, 2)  # the first release whose CUDA wheels carry +cuXYZ (1.1.0's were cu90/torch-1.1.0-...)
_PIP_INDEX_SINCE = (2, 0)  # from 2.0 the pages show `--index-url .../cuXYZ`; before, `+cuXYZ -f torch_stable.html`
_NON_NVIDIA_NAME = re.compile(r"^(AMD|Radeon|Intel)\b|\bgfx\d", re.IGNORECASE)


# --- which device the job is judged for -----------------------------------------------------------------------------
def expected_kind(run: Run) -> str:
    """The device kind rung 1 is judged for (record.device.judged_device), the same for `env`, `env --from` and `run`
    on one machine and intent; "cuda" when nothing tells."""
    return judged_device(run) or "cuda"


def nvidia_expected(run: Run) -> bool:
    """False when the job is meant for meta / mps / xpu / cpu: NVIDIA-specific findings are then only info."""
    return judged_for_nvidia(run)


# --- what the facts add up to ---------------------------------------------------------------------------------------
_AMD_GPU = re.compile(
    r"\b(?:amd|radeon|rx|rx ?[0-9]{3,4}(?: ?xtx?)?|instinct|mi[0-9]{3}x?|gfx[0-9]{3,4}[a-z]?)\b|\bamd ?[0-9]{4}",
    re.IGNORECASE,
)


def sm_name(capability: str) -> str:
    """ "8.6" -> "sm_86": the name torch.cuda.get_arch_list() gives a compute capability."""
    return "sm_" + capability.replace(".", "")


def is_amd_gpu(name: str) -> bool:
    """ "AMD Radeon RX 6700", "gfx1150", "Instinct MI300X"."""
    return bool(_AMD_GPU.search(name))


def amd_gpu(env: Environment) -> str | None:
    """The AMD GPU the facts name, if any."""
    return next((g for g in env.host.other_gpus if is_amd_gpu(g)), None)


def intel_gpu(env: Environment) -> str | None:
    """The Intel GPU the facts name, if any."""
    return next((g for g in env.host.other_gpus if g.lower().startswith("intel")), None)


def is_rocm(env: Environment) -> bool:
    return bool(env.torch.hip_version)


def nvidia_devices(env: Environment) -> list[GpuDevice]:
    return [d for d in env.driver.devices if not _NON_NVIDIA_NAME.search(d.name)]


def nvidia_nodes(env: Environment) -> list[str]:
    return [n for n in env.host.dev_nodes or [] if _NVIDIA_NODE_RE.match(n)]


WSL_GPU_WINDOWS_BUILD = 19044  # Windows 10 21H2; Windows 11 is 22000 and later (Insider builds from 20145 had it)


def old_windows_for_wsl_gpu(env: Environment) -> bool:
    build = env.host.windows_build
    return build is not None and build < WSL_GPU_WINDOWS_BUILD


def gpu_presence(env: Environment) -> str:
    """ "present" | "none" | "unknown": whether an NVIDIA GPU exists at all, told positively, never guessed."""
    # torch that counted a device, or answered is_available() True, reached an NVIDIA GPU on this machine
    # (in this session, or another session of the same report: available_elsewhere)
    t = env.torch
    torch_sees = bool(t.device_count or t.is_available or t.available_elsewhere) and not is_rocm(env)
    h = env.host
    if (
        nvidia_devices(env)
        or (h.pci_nvidia_devices or 0) > 0
        or nvidia_nodes(env)
        or h.proc_driver_version
        or torch_sees
        or h.jetson  # a Jetson's GPU is integrated: there even without nvidia-smi or a PCI listing
    ):
        return "present"
    if env.driver.no_devices_reported or h.no_gpu_stated or (h.other_gpus and not env.driver.driver_version):
        return "none"
    if h.wsl_version == 1 or (h.wsl and old_windows_for_wsl_gpu(env)):
        return "none"  # WSL 1's kernel (4.4.0-NNNNN-Microsoft), or a Windows before 21H2: no path to any GPU
    if env.source == "probe" and "/dev/dxg" not in (h.dev_nodes or []):
        # The probe looked everywhere: NVML, /dev, /proc/driver/nvidia, the PCI bus and torch found nothing.
        return "none"
    if env.source == "text" and _text_says_none(env):
        return "none"
    return "unknown"


def _text_says_none(env: Environment) -> bool:
    """A pasted report that shows a machine where no NVIDIA GPU can exist or be reached."""
    h, d = env.host, env.driver
    if d.driver_version or d.cuda_driver_version or errors_pointing_to(env, "driver-too-old", "cuda-init-failed"):
        return False
    if h.os_name == "darwin":
        return True  # macOS has had no CUDA since 10.13
    nvml_failed = d.nvml_loaded is False or has_error(env, "smi-no-driver")
    if (h.wsl and nvml_failed) or has_error(env, "ctk-wsl-no-adapter"):
        return True  # WSL exposes the GPU only through the Windows driver; nvidia-smi failing there means none is
    cuda_visible = env.env_vars.get("CUDA_VISIBLE_DEVICES")
    unavailable = env.torch.is_available is False or has_error(env, "cuda-100")
    return h.runtime == "colab" and unavailable and cuda_visible is None and not h.in_container


def has_error(env: Environment, key: str) -> bool:
    return any(e.key == key for e in env.errors)


def errors_pointing_to(env: Environment, *findings: str) -> list[ErrorSeen]:
    """The error texts of a pasted report that point to these findings (or families), in order."""
    return [e for e in env.errors if e.finding in findings]


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
class VisibleDevices(msgspec.Struct):
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
    # A pasted text lists GPUs only partly (cut tables): only what hides every GPU is certain: empty, "-1", or a
    # first entry that can name no GPU ("all", NVIDIA_VISIBLE_DEVICES' word: neither an index nor a UUID's hex).
    names_none = bool(entries) and _names_no_gpu(entries[0])
    hides_all = not entries or entries[0] == "-1" or names_none
    ignored = [f"{entries[0]} (neither a GPU index nor a UUID: CUDA stops there)"] if names_none else []
    return VisibleDevices(value, entries, ignored, 0 if hides_all else None)


_UUID_BODY = re.compile(r"^[0-9a-fA-F-]+(?:/[0-9]+/[0-9]+)?$")


def _names_no_gpu(entry: str) -> bool:
    """An entry CUDA can match to no device: not an index, and not (a prefix of) a GPU or MIG UUID. A variable or a
    placeholder (`$GPU`, `${LOCAL_RANK}`, `%GPU%`, `<id>`) is the shell's to fill in: not a value read."""
    if entry.lstrip("-").isdigit() or any(mark in entry for mark in "$%{<`"):
        return False
    body = entry.removeprefix("MIG-").removeprefix("GPU-")
    return not _UUID_BODY.match(body)


# --- install commands -----------------------------------------------------------------------------------------------
def pip_install(
    torch_version: str | None,
    cuda: str,
    companions: Sequence[str] = (),
    seen: Mapping[str, str] | None = None,
    os_name: str | None = None,
) -> str:
    """The exact pip command for torch `torch_version` (None: the newest) built for CUDA `cuda`, with `companions`
    (torchvision / torchaudio) pinned to the versions published with that torch (the table; else `seen`, the versions
    the report shows next to that same torch)."""
    tag = wheel_tag(cuda)
    base = base_version(torch_version) if torch_version else None
    pins = companions_of(base) if base else None
    specs = [f"torch=={base}" if base else "torch"]
    for name in companions:
        pinned = (pins[0] if name == "torchvision" else pins[1]) if pins else None
        pinned = pinned or (base_version((seen or {}).get(name) or "") or None)
        specs.append(f"{name}=={pinned}" if pinned else name)
    if base is None or version_tuple(base) >= _PIP_INDEX_SINCE:
        return f"python -m pip install {' '.join(specs)} --index-url {WHEEL_INDEX}/{tag}"
    release = TORCH_RELEASES.get(release_of(base))
    if release is not None and release.pypi_cuda == cuda and os_name != "windows":
        # The default CUDA of a 1.x release came from PyPI itself, without +cuXYZ (the previous-versions page).
        return f"python -m pip install {' '.join(specs)}"
    if version_tuple(base) < _LOCAL_TAGS_SINCE:
        # 1.1 and older: no +cuXYZ in the wheels' names, one page per CUDA (`torch==1.1.0+cu90` matched nothing)
        return f"python -m pip install {' '.join(specs)} -f {WHEEL_INDEX}/{tag}/torch_stable.html"
    # Before 2.0 the CUDA wheels carried +cuXYZ (torchvision too, torchaudio not) and lived in torch_stable.html.
    local = [s + f"+{tag}" if s.startswith(("torch==", "torchvision==")) else s for s in specs]
    return f"python -m pip install {' '.join(local)} -f {WHEEL_INDEX}/torch_stable.html"


def conda_install(release: str, cuda: str) -> str:
    channels = "-c pytorch -c conda-forge" if (major_version(cuda) or 0) >= 11 else "-c pytorch"
    return f"conda install pytorch=={release}.0 cudatoolkit={cuda} {channels}"


class Variant(msgspec.Struct):
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


def cuda_variant_for(env: Environment, *, exact_only: bool = False) -> Variant | None:
    """The CUDA build of the user's torch release that the driver and the GPUs support.

    In order: the newest build the driver fully supports; else the oldest one of the driver's CUDA major version
    (minor version compatibility: a driver that reports CUDA 12.4 runs any 12.x build); else the same from older
    releases, newest first. With the driver unknown: the build that needs the oldest driver. `exact_only`: builds the
    driver fully supports (where the report shows minor version compatibility failing already).
    """
    limit = driver_cuda(env)
    capabilities = [d.compute_capability for d in nvidia_devices(env) if d.compute_capability]
    version = env.torch.version
    releases = sorted(TORCH_RELEASES, key=version_tuple, reverse=True)
    own = release_of(version) if version else None
    # the user's release first; then the releases with wheels for their Python, newest first
    others = sorted((r for r in releases if r != own), key=lambda r: python_fits(r, env), reverse=True)
    order = ([own] if own in TORCH_RELEASES else []) + others
    for release in order:
        usable = [
            cuda
            for cuda in TORCH_RELEASES[release].cuda_variants
            if runs_on_driver(cuda, limit) in (("exact",) if exact_only else ("exact", "compat"))
            and _has_kernels_for(release, cuda, capabilities)
        ]
        if not usable:
            continue
        exact = [c for c in usable if runs_on_driver(c, limit) == "exact"]
        # With the driver unknown, the CUDA that needs the oldest driver (as arch_builds): a cu13x build asks for a
        # driver >= 580 the user may not have.
        cuda = max(exact, key=version_tuple) if exact and limit is not None else min(usable, key=version_tuple)
        pinned = version if release == own and version else (f"{release}.0" if release != releases[0] else None)
        return Variant(pinned, cuda, minor_compat=not exact)
    return None


def blackwell_variant(release: str) -> str | None:
    """The CUDA of `release` that needs the oldest driver among its builds with Blackwell kernels (sm_120)."""
    have = [c for (r, c), archs in ARCH_LISTS.items() if r == release and arch_supports(archs, "12.0")]
    return min(have, key=version_tuple) if have else None


def _has_kernels_for(release: str, cuda: str, capabilities: list[str]) -> bool:
    archs = ARCH_LISTS.get((release, cuda))
    return archs is None or all(arch_supports(archs, cc) for cc in capabilities)


class ArchBuild(msgspec.Struct, frozen=True):
    """A published build with kernels for the GPU: its release, its CUDA, and how the driver runs it."""

    release: str
    cuda: str
    runs: str  # "exact": the driver's CUDA covers it | "compat": through minor version compatibility

    def command(self, env: Environment) -> str:
        t = env.torch
        own = release_of(t.version) if t.version else None
        # Releases before 2.0 in the table were read from the conda packages: their command, unless this is the
        # user's own release and their torch a pip wheel ("1.8.1+cu101" -> "1.8.1+cu111", as its thread fixed it).
        # A plain "1.8.0" the report shows pip installing (its command, its log) is PyPI's wheel: its CUDA variants
        # are pip's too. A `torch==` line alone is not that: conda's torch shows so in `pip freeze`.
        command = t.install_command or ""
        pip_command = "pip" in command and not command.lstrip().startswith(("conda", "mamba", "micromamba"))
        pip_installed = t.install_method == "pip" and bool(t.pip_installed_torch or pip_command)
        pip_wheel = self.release == own and (
            pip_installed or (t.install_method != "conda" and "+cu" in (t.version or ""))
        )
        if version_tuple(self.release) < _PIP_INDEX_SINCE and not pip_wheel:
            return conda_install(self.release, self.cuda)
        pinned = t.version if self.release == own and t.version else f"{self.release}.0"
        wanted = [n for n in ("torchvision", "torchaudio") if n in t.companions]
        seen = t.companions if self.release == own else None  # the report's pairing holds for its own torch only
        return pip_install(pinned, self.cuda, wanted, seen, env.host.os_name)


def arch_builds(capability: str, env: Environment) -> list[ArchBuild]:
    """The published builds with kernels for `capability` that the driver runs, best first: the user's own release
    (the smallest change); then the newest release the driver fully supports; then the newest it runs through minor
    version compatibility. In a release: the newest CUDA the driver fully supports, else the oldest it runs. With the
    driver unknown: the newest release, in the CUDA that needs the oldest driver (a cu132 build asks for a driver
    >= 580 the user may not have)."""
    limit = driver_cuda(env)
    own = release_of(env.torch.version) if env.torch.version else None
    found = [
        ArchBuild(release, cuda, runs)
        for (release, cuda), archs in ARCH_LISTS.items()
        if (runs := runs_on_driver(cuda, limit)) and arch_supports(archs, capability)
    ]

    def rank(b: ArchBuild) -> tuple[bool, bool, bool, tuple[int, ...], tuple[int, ...]]:
        cuda = version_tuple(b.cuda)
        newest_first = cuda if b.runs == "exact" and limit is not None else tuple(-p for p in cuda)
        return (
            b.release == own,
            python_fits(b.release, env),
            b.runs == "exact",
            version_tuple(b.release),
            newest_first,
        )

    return sorted(found, key=rank, reverse=True)


def python_fits(release: str, env: Environment) -> bool:
    """Whether `release` published wheels for the report's Python (True where either is not known)."""
    entry = TORCH_RELEASES.get(release)
    have = version_tuple(env.host.python_version or "")[:2]
    if entry is None or entry.python is None or len(have) < 2:
        return True
    return version_tuple(entry.python[0]) <= have <= version_tuple(entry.python[1])


def python_note(env: Environment, release: str) -> list[str]:
    """A fix that moves torch to a release without wheels for the report's Python says so, and what to make first."""
    entry = TORCH_RELEASES.get(release)
    if python_fits(release, env) or entry is None or entry.python is None:
        return []
    low, high = entry.python
    wanted = "3.12" if version_tuple(low) <= (3, 12) <= version_tuple(high) else high
    return [
        f"# torch {release} has wheels for Python {low} to {high}, and this environment runs Python "
        f"{env.host.python_version}: make one with Python {wanted} first (conda create -n torch python={wanted}, "
        f"or python{wanted} -m venv .venv), then run the commands above in it"
    ]


def build_arch_list(env: Environment) -> list[str] | None:
    """The build's arch list: what torch said, else the published list of that release and CUDA variant."""
    if env.torch.arch_list:
        return env.torch.arch_list
    if env.torch.version and env.torch.cuda_version:
        found = arch_list_for(env.torch.version, env.torch.cuda_version)
        return list(found) if found else None
    return None


def driver_needed(cuda: str, env: Environment) -> str:
    """ "NVIDIA driver >= 560.28.03 (>= 525.60.13 through CUDA 12.x minor version compatibility)": the GA table's
    driver, and the major version's minor-compatibility floor where that is older (CUDA 11 and later)."""
    exact = min_driver_for(cuda, env.host.os_name)
    floor = compat_min_driver_for(cuda, env.host.os_name)
    major = major_version(cuda)
    if exact:
        older = floor and floor != exact and version_tuple(floor) < version_tuple(exact)
        compat = f" (>= {floor} through CUDA {major}.x minor version compatibility)" if older else ""
        return f"NVIDIA driver >= {exact}{compat}"
    return (
        f"NVIDIA driver >= {floor} (CUDA {major}.x minor version compatibility)" if floor else "a recent NVIDIA driver"
    )


# --- what rung 1 could not measure, and what to paste next ----------------------------------------------------------
class RungGap(msgspec.Struct):
    missing: list[str]  # the rung-1 facts the record lacks, in words
    commands: list[str]  # the commands whose output would settle them, most decisive first
    said: str | None = None  # what the report does show (a framework running on the CPU), in its words

    def reason(self) -> str:
        shown = f"the job ran on the CPU ({self.said}), and " if self.said else ""
        return f"not measured: {shown}the report does not say " + _join(self.missing)

    def next_step(self) -> str:
        rest = f" (or, for part of it: {'; '.join(f'`{c}`' for c in self.commands[1:])})" if self.commands[1:] else ""
        return f"Paste the output of `{self.commands[0]}` next{rest}."


_BUILD, _GPU, _REACH = "the CUDA of the torch build", "which NVIDIA GPU the driver sees", "whether torch reaches it"
_NEXT_COMMANDS = (
    ("python -m torch.utils.collect_env", {_BUILD, _GPU, _REACH}),
    ("nvidia-smi", {_GPU}),
    (
        'python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())"',
        {_BUILD, _REACH},
    ),
)


def rung_one_gap(run: Run) -> RungGap | None:
    """The facts rung 1 needs that the record lacks, or None when rung 1 was measured (or settled otherwise).

    Rung 1 is settled by any one of: torch reaching a GPU, no NVIDIA GPU existing, torch not importable, or a job meant
    for another device. Otherwise it needs all three: the build's CUDA, the GPU the driver sees, whether torch reaches
    it. Without them "healthy" would be a guess; the verdict is "inconclusive" instead.
    """
    env = run.environment
    if env is not None and expected_kind(run) == "mps" and env.torch.installed is not False:
        return _mps_gap(env)
    if env is not None and expected_kind(run) == "xpu" and env.torch.installed is not False:
        return _xpu_gap(env)
    if env is None or expected_kind(run) != "cuda" or env.torch.installed is False:
        return None
    t = env.torch
    if t.is_available or t.device_count or t.gpu_use_evidence or gpu_presence(env) == "none":
        return None
    missing = []
    if t.is_cpu_build is None and t.cuda_version is None and t.hip_version is None:
        missing.append(_BUILD)
    if gpu_presence(env) == "unknown":
        missing.append(_GPU)
    if t.is_available is None and t.device_count is None:
        missing.append(_REACH)
    if not missing:
        return None
    wanted = set(missing)
    ranked = sorted(_NEXT_COMMANDS, key=lambda c: -len(c[1] & wanted))
    return RungGap(missing, [command for command, settles in ranked if settles & wanted], t.cpu_fallback_evidence)


_MPS_REACH = "whether torch can use MPS (Apple's GPU)"
_MPS_CHECK = (
    'python -c "import platform, torch; print(platform.mac_ver()[0], platform.machine(), torch.__version__, '
    'torch.backends.mps.is_built(), torch.backends.mps.is_available())"'
)


def _mps_gap(env: Environment) -> RungGap | None:
    """A Mac's report about MPS that never says what torch answers for it: the one fact rung 1 needs there."""
    if "mps" in env.torch.other_accelerators:
        return None
    return RungGap([_MPS_REACH], [_MPS_CHECK])


_XPU_REACH = "whether torch can use the Intel GPU (torch.xpu.is_available())"
_XPU_CHECK = 'python -c "import torch; print(torch.__version__, torch.xpu.is_available(), torch.xpu.device_count())"'


def _xpu_gap(env: Environment) -> RungGap | None:
    """A report about the Intel GPU (its XPU build, or torch.xpu asked) that never says what torch answers for it."""
    if "xpu" in env.torch.other_accelerators or any(e.finding is not None for e in env.errors):
        return None
    return RungGap([_XPU_REACH], [_XPU_CHECK])


def not_rung_one_errors(run: Run) -> list[str]:
    """Errors of a pasted report that are not rung-1 causes (out of memory, ...), named as such for the verdict."""
    env = run.environment
    if env is None:
        return []
    notes = []
    for error in env.errors:
        sig = signature(error.key)
        if error.finding is None and sig is not None:
            notes.append(f'Not a rung-1 cause: "{error.text[:80]}" ({sig.meaning}).')
    return notes[:3]


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


# --- complete install fixes: remove the wrong build, move the companions, pin versions that exist --------------------
def uninstall_lines(env: Environment) -> list[str]:
    """Remove what is installed now: pip keeps an installed +cpu wheel ("Requirement already satisfied"), and conda's
    cpuonly pins every later solve to CPU builds."""
    t = env.torch
    names = ["torch", *[n for n in ("torchvision", "torchaudio", "xformers") if n in t.companions]]
    lines = []
    if t.cpuonly_package or t.install_method == "conda":
        conda_names = ["pytorch" if n == "torch" else n for n in names if n != "xformers"]
        why = "cpuonly pins conda to CPU builds" if t.cpuonly_package else "conda's build goes first"
        extra = " cpuonly" if t.cpuonly_package else ""
        lines.append(f"conda remove -y{extra} {' '.join(conda_names)}   # {why}")
    elif t.install_method is None and env.host.conda_seen:  # a conda env's cpuonly would undo the pip install
        lines.append("conda list cpuonly   # in a conda env: if it is listed, `conda remove -y cpuonly` first")
    lines.append(f"python -m pip uninstall -y {' '.join(names)}")
    return lines


def install_lines(env: Environment, variant: Variant) -> list[str]:
    """The pip command for the variant with the companions of the paste moved along (pinned where the table knows)."""
    t = env.torch
    wanted = [n for n in ("torchvision", "torchaudio") if n in t.companions]
    same_torch = bool(t.version and variant.torch_version) and base_version(t.version or "") == base_version(
        variant.torch_version or ""
    )
    seen = t.companions if same_torch else None  # the report's pairing holds only for the torch it was seen with
    command = pip_install(variant.torch_version, variant.cuda, wanted, seen, env.host.os_name)
    lines = [command]
    if "xformers" in t.companions:
        index = (
            command.split("--index-url ", 1)[1]
            if "--index-url " in command
            else f"{WHEEL_INDEX}/{wheel_tag(variant.cuda)}"
        )
        lines.append(f"python -m pip install xformers --index-url {index}   # the xformers built for this torch")
    return lines


def wheel_tag(cuda: str) -> str:
    """The wheel index's name for a CUDA version: "12.9" -> "cu129"."""
    return "cu" + "".join(str(p) for p in version_tuple(cuda)[:2])
