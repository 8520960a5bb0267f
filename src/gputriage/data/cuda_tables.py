"""Published facts about CUDA, NVIDIA drivers and PyTorch builds, in one place, each table with its source.

Rules consult these tables; nothing here does I/O. Versions are kept as the strings people paste ("12.4",
"535.104.05") and compared with `version_tuple`.
"""

from __future__ import annotations

from typing import NamedTuple

import msgspec

_MAX_VERSION_DIGITS = 9


def version_tuple(text: str) -> tuple[int, ...]:
    """ "535.104.05" -> (535, 104, 5); stops at the first part that is not a number ("2.1.0+cu121" -> (2, 1, 0)).

    Only ASCII digits count ("2.²" -> (2,)), and a part longer than 9 digits ends the version: text from other people's
    machines must never turn into a huge int or a ValueError.
    """
    parts: list[int] = []
    for part in text.split("+", 1)[0].split(".")[:8]:
        digits = ""
        for ch in part:
            if not ("0" <= ch <= "9"):
                break
            digits += ch
        if not digits or len(digits) > _MAX_VERSION_DIGITS:
            break
        parts.append(int(digits))
        if len(digits) != len(part):
            break
    return tuple(parts)


def release_of(torch_version: str) -> str:
    """ "2.6.0+cu126" -> "2.6"; the key of the per-release tables."""
    return ".".join(str(p) for p in version_tuple(torch_version)[:2])


# --- Minimum driver per CUDA toolkit --------------------------------------------------------------------------------
# Source: NVIDIA CUDA Toolkit Release Notes, Table 3 "CUDA Toolkit and Corresponding Driver Versions" (the driver that
# ships with each toolkit's GA release), https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html
class DriverMin(NamedTuple):
    linux: str
    windows: str


MIN_DRIVER: dict[str, DriverMin] = {
    "8.0": DriverMin("375.26", "376.51"),
    "9.0": DriverMin("384.81", "385.54"),
    "9.2": DriverMin("396.26", "397.44"),
    "10.0": DriverMin("410.48", "411.31"),
    "10.1": DriverMin("418.39", "418.96"),
    "10.2": DriverMin("440.33", "441.22"),
    "11.0": DriverMin("450.51.05", "451.82"),
    "11.1": DriverMin("455.23", "456.38"),
    "11.2": DriverMin("460.27.03", "460.82"),
    "11.3": DriverMin("465.19.01", "465.89"),
    "11.4": DriverMin("470.42.01", "471.11"),
    "11.5": DriverMin("495.29.05", "496.04"),
    "11.6": DriverMin("510.39.01", "511.23"),
    "11.7": DriverMin("515.43.04", "516.01"),
    "11.8": DriverMin("520.61.05", "520.06"),
    "12.0": DriverMin("525.60.13", "527.41"),
    "12.1": DriverMin("530.30.02", "531.14"),
    "12.2": DriverMin("535.54.03", "536.25"),
    "12.3": DriverMin("545.23.06", "545.84"),
    "12.4": DriverMin("550.54.14", "551.61"),
    "12.5": DriverMin("555.42.02", "555.85"),
    "12.6": DriverMin("560.28.03", "560.76"),
    "12.8": DriverMin("570.26", "570.65"),
    "12.9": DriverMin("575.51.03", "576.02"),
    "13.0": DriverMin("580.65.06", "580.88"),
}

# Since CUDA 11, "minor version compatibility": an application built with any 11.x (12.x, 13.x) toolkit runs on a driver
# of that major family, except for features that need the newer driver (PTX JIT of newer PTX). Source: same release
# notes, Table 2 "CUDA Toolkit and Minimum Required Driver Version for CUDA Minor Version Compatibility".
MINOR_COMPAT_MIN_DRIVER: dict[int, DriverMin] = {
    11: DriverMin("450.80.02", "452.39"),
    12: DriverMin("525.60.13", "527.41"),
    13: DriverMin("580.65.06", "580.88"),
}


def min_driver_for(cuda: str, os_name: str | None) -> str | None:
    """The driver that a CUDA `cuda` ("12.4") runtime needs at GA, for this OS (Linux when unknown)."""
    entry = MIN_DRIVER.get(".".join(str(p) for p in version_tuple(cuda)[:2]))
    if entry is None:
        return None
    return entry.windows if os_name == "windows" else entry.linux


def compat_min_driver_for(cuda: str, os_name: str | None) -> str | None:
    """The oldest driver that runs CUDA `cuda` at all (minor version compatibility), for CUDA 11 and later."""
    parts = version_tuple(cuda)
    entry = MINOR_COMPAT_MIN_DRIVER.get(parts[0]) if parts else None
    if entry is None:
        return min_driver_for(cuda, os_name)
    return entry.windows if os_name == "windows" else entry.linux


def cuda_supported_by_driver(driver_version: str, os_name: str | None) -> str | None:
    """The newest CUDA whose GA driver minimum `driver_version` meets (what nvidia-smi prints as "CUDA Version")."""
    have = version_tuple(driver_version)
    if not have:
        return None
    best: str | None = None
    for cuda, entry in MIN_DRIVER.items():
        need = entry.windows if os_name == "windows" else entry.linux
        if have >= version_tuple(need) and (best is None or version_tuple(cuda) > version_tuple(best)):
            best = cuda
    return best


# --- PyTorch releases: the CUDA variants published, the CUDA of the default PyPI wheel ------------------------------
# Sources: PyTorch RELEASE.md "Release Compatibility Matrix" (https://github.com/pytorch/pytorch/blob/main/RELEASE.md)
# and https://pytorch.org/get-started/previous-versions/ for 1.x; for 2.13, the PYTORCH_RELEASES_CODE_CC table that
# ships inside torch 2.13's own torch/cuda/__init__.py; 2.10-2.12 and 2.14 from the RELEASE.md matrix (stable and
# experimental CUDA columns; pytorch#194367 for 2.14). `pypi_cuda` is the CUDA of the plain `pip install torch==X`
# Linux wheel (None where PyPI's Linux wheel was not a CUDA build, or we do not know it): 13.0 from 2.11
# (pytorch#177975, "transitioning PyPI CUDA wheels to CUDA 13.0 as the stable release 2.11"), and still for 2.14,
# whose RFC (pytorch#190355) proposed 13.2 but whose release/2.14 kept CUDA_STABLE = "13.0": PyPI's 2.14.0 installs as
# 2.14.0+cu130 and pulls cuda-toolkit 13.0.3, as users' own logs show.
class TorchRelease(msgspec.Struct, frozen=True):
    cuda_variants: tuple[str, ...]
    pypi_cuda: str | None = None
    # the Pythons its x.y.0 wheels were published for, oldest and newest (RELEASE.md's matrix, and pytorch#194367 for
    # 2.14; before 2.0 the wheels of the previous-versions page: 1.4 was the last with Python 2.7, 1.7.0 had none for
    # 3.9): a fix that moves torch to this release needs one of them
    python: tuple[str, str] | None = None


TORCH_RELEASES: dict[str, TorchRelease] = {
    "1.0": TorchRelease(("8.0", "9.0", "10.0"), "9.0", ("2.7", "3.7")),
    "1.1": TorchRelease(("9.0", "10.0"), "10.0", ("2.7", "3.7")),
    "1.2": TorchRelease(("9.2", "10.0"), "10.0", ("2.7", "3.7")),
    "1.3": TorchRelease(("9.2", "10.0", "10.1"), "10.1", ("2.7", "3.7")),
    "1.4": TorchRelease(("9.2", "10.1"), "10.1", ("2.7", "3.8")),
    "1.5": TorchRelease(("9.2", "10.1", "10.2"), "10.2", ("3.5", "3.8")),
    "1.6": TorchRelease(("9.2", "10.1", "10.2"), "10.2", ("3.6", "3.8")),
    "1.7": TorchRelease(("9.2", "10.1", "10.2", "11.0"), "10.2", ("3.6", "3.8")),
    "1.8": TorchRelease(("10.1", "10.2", "11.1"), "10.2", ("3.6", "3.9")),
    "1.9": TorchRelease(("10.2", "11.1"), "10.2", ("3.6", "3.9")),
    "1.10": TorchRelease(("10.2", "11.1", "11.3"), "10.2", ("3.6", "3.9")),
    "1.11": TorchRelease(("10.2", "11.3", "11.5"), "10.2", ("3.7", "3.10")),
    "1.12": TorchRelease(("10.2", "11.3", "11.6"), "10.2", ("3.7", "3.10")),
    "1.13": TorchRelease(("11.6", "11.7"), "11.7", ("3.7", "3.10")),
    "2.0": TorchRelease(("11.7", "11.8"), "11.7", ("3.8", "3.11")),
    "2.1": TorchRelease(("11.8", "12.1"), "12.1", ("3.8", "3.11")),
    "2.2": TorchRelease(("11.8", "12.1"), "12.1", ("3.8", "3.11")),
    "2.3": TorchRelease(("11.8", "12.1"), "12.1", ("3.8", "3.11")),
    "2.4": TorchRelease(("11.8", "12.1", "12.4"), "12.1", ("3.8", "3.12")),
    "2.5": TorchRelease(("11.8", "12.1", "12.4"), "12.4", ("3.9", "3.12")),
    "2.6": TorchRelease(("11.8", "12.4", "12.6"), "12.4", ("3.9", "3.13")),
    "2.7": TorchRelease(("11.8", "12.6", "12.8"), "12.6", ("3.9", "3.13")),
    "2.8": TorchRelease(("12.6", "12.8", "12.9"), "12.8", ("3.9", "3.13")),
    "2.9": TorchRelease(("12.6", "12.8", "13.0"), "12.8", ("3.10", "3.14")),
    "2.10": TorchRelease(("12.6", "12.8", "13.0"), None, ("3.10", "3.14")),
    "2.11": TorchRelease(("12.6", "12.8", "13.0"), "13.0", ("3.10", "3.14")),
    "2.12": TorchRelease(("12.6", "13.0", "13.2"), "13.0", ("3.10", "3.14")),
    "2.13": TorchRelease(("12.6", "12.9", "13.0", "13.2"), "13.0", ("3.10", "3.15")),
    "2.14": TorchRelease(("12.6", "13.0", "13.2"), "13.0", ("3.10", "3.15")),
}

# --- The companion packages of each torch release: (torchvision, torchaudio) --------------------------------------
# Source: https://pytorch.org/get-started/previous-versions/ (pytorch.github.io _get_started/previous-versions.md), the
# pip lines of each release; 2.4-2.9 from the same page's later revisions. Before 1.7 the page pins no torchaudio
# (None). A release missing here keeps the companion version the report shows, else it goes unpinned.
COMPANIONS: dict[str, tuple[str, str | None]] = {
    "1.0.0": ("0.2.1", None),
    "1.0.1": ("0.2.2", None),
    "1.1.0": ("0.3.0", None),
    "1.2.0": ("0.4.0", None),
    "1.4.0": ("0.5.0", None),
    "1.5.0": ("0.6.0", None),
    "1.5.1": ("0.6.1", None),
    "1.6.0": ("0.7.0", None),
    "1.7.0": ("0.8.0", "0.7.0"),
    "1.7.1": ("0.8.2", "0.7.2"),
    "1.8.0": ("0.9.0", "0.8.0"),
    "1.8.1": ("0.9.1", "0.8.1"),
    "1.9.0": ("0.10.0", "0.9.0"),
    "1.9.1": ("0.10.1", "0.9.1"),
    "1.10.0": ("0.11.0", "0.10.0"),
    "1.10.1": ("0.11.2", "0.10.1"),
    "1.11.0": ("0.12.0", "0.11.0"),
    "1.12.0": ("0.13.0", "0.12.0"),
    "1.12.1": ("0.13.1", "0.12.1"),
    "1.13.0": ("0.14.0", "0.13.0"),
    "1.13.1": ("0.14.1", "0.13.1"),
    "2.0.0": ("0.15.1", "2.0.1"),
    "2.0.1": ("0.15.2", "2.0.2"),
    "2.1.0": ("0.16.0", "2.1.0"),
    "2.1.1": ("0.16.1", "2.1.1"),
    "2.1.2": ("0.16.2", "2.1.2"),
    "2.2.0": ("0.17.0", "2.2.0"),
    "2.2.1": ("0.17.1", "2.2.1"),
    "2.2.2": ("0.17.2", "2.2.2"),
    "2.3.0": ("0.18.0", "2.3.0"),
    "2.3.1": ("0.18.1", "2.3.1"),
    "2.4.0": ("0.19.0", "2.4.0"),
    "2.4.1": ("0.19.1", "2.4.1"),
    "2.5.0": ("0.20.0", "2.5.0"),
    "2.5.1": ("0.20.1", "2.5.1"),
    "2.6.0": ("0.21.0", "2.6.0"),
    "2.7.0": ("0.22.0", "2.7.0"),
    "2.7.1": ("0.22.1", "2.7.1"),
    "2.8.0": ("0.23.0", "2.8.0"),
    "2.9.0": ("0.24.0", "2.9.0"),
    "2.9.1": ("0.24.1", "2.9.1"),
    # torchaudio is in maintenance mode and stays at 2.11.0 from torch 2.11 on (users' pinned installs:
    # `torch==2.12.0 torchvision==0.27.0 torchaudio==2.11.0`, and likewise 2.13.0/0.28.0 and 2.14.0/0.29.0)
    "2.12.0": ("0.27.0", "2.11.0"),
    "2.13.0": ("0.28.0", "2.11.0"),
    "2.14.0": ("0.29.0", "2.11.0"),
}


def companions_of(torch_version: str) -> tuple[str, str | None] | None:
    """(torchvision, torchaudio) published with torch `torch_version` ("2.1.0+cpu" -> ("0.16.0", "2.1.0"))."""
    return COMPANIONS.get(".".join(str(p) for p in version_tuple(torch_version)[:3]))


# --- Architectures compiled into each build (what torch.cuda.get_arch_list() returns) ------------------------------
# Sources: conda packages' cuobjdump listing collected in github.com/moi90/pytorch_compute_capabilities (table.md) for
# 1.x-2.7; torch 2.13's PYTORCH_RELEASES_CODE_CC (x86_64) for 2.13, and for 2.14, which RELEASE.md's CUDA Support
# Matrix gives as 2.13's (pytorch#197555: "Is 2.13 the same as 2.14?" "yes"; a 2.14.0+cu130 build reports
# sm_75,sm_80,sm_86,sm_90,sm_100,sm_120); the "sm_86 is not compatible" warning of the
# cudatoolkit=10.2 nightly in pytorch#46794 for 1.8 cu10.2; 2.9 from the per-variant lists quoted in
# Comfy-Org/ComfyUI#16438 (cu126 5.0-9.0, cu128 7.0-12.0, cu130 7.5-12.0). Keyed by (release, CUDA variant).
_SM_KEPLER_TO_TURING = ("sm_37", "sm_50", "sm_60", "sm_61", "sm_70", "sm_75")
_SM_TO_AMPERE = (*_SM_KEPLER_TO_TURING, "sm_80", "sm_86")
_SM_MAXWELL_TO_HOPPER = ("sm_50", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
_SM_TURING_TO_BLACKWELL = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")

_SM_KEPLER_TO_VOLTA = ("sm_35", "sm_37", "sm_50", "sm_60", "sm_61", "sm_70")
_SM_K35_TO_TURING = ("sm_35", *_SM_KEPLER_TO_TURING)
_SM_K35_TO_AMPERE = ("sm_35", *_SM_TO_AMPERE)

ARCH_LISTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("1.0", "9.0"): ("sm_35", "sm_37", "sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_70"),
    ("1.0", "10.0"): ("sm_30", "sm_35", "sm_50", "sm_60", "sm_61", "sm_70", "sm_75"),
    ("1.1", "9.0"): ("sm_35", "sm_50", "sm_60", "sm_61", "sm_70"),
    ("1.1", "10.0"): ("sm_35", "sm_50", "sm_60", "sm_61", "sm_70", "sm_75"),
    ("1.2", "9.2"): ("sm_35", "sm_50", "sm_60", "sm_61", "sm_70"),
    ("1.2", "10.0"): ("sm_35", "sm_50", "sm_60", "sm_61", "sm_70", "sm_75"),
    ("1.3", "9.2"): ("sm_35", "sm_50", "sm_60", "sm_61", "sm_70"),
    ("1.3", "10.0"): ("sm_30", "sm_35", "sm_50", "sm_60", "sm_61", "sm_70", "sm_75"),
    ("1.3", "10.1"): ("sm_30", "sm_35", "sm_50", "sm_60", "sm_61", "sm_70", "sm_75"),
    ("1.4", "9.2"): _SM_KEPLER_TO_VOLTA,
    ("1.4", "10.1"): _SM_K35_TO_TURING,
    ("1.5", "9.2"): _SM_KEPLER_TO_VOLTA,
    ("1.5", "10.1"): _SM_K35_TO_TURING,
    ("1.5", "10.2"): _SM_K35_TO_TURING,
    ("1.6", "9.2"): _SM_KEPLER_TO_VOLTA,
    ("1.6", "10.1"): _SM_K35_TO_TURING,
    ("1.6", "10.2"): _SM_K35_TO_TURING,
    ("1.7", "9.2"): _SM_KEPLER_TO_VOLTA,
    ("1.7", "10.1"): _SM_K35_TO_TURING,
    ("1.7", "10.2"): _SM_K35_TO_TURING,
    ("1.7", "11.0"): ("sm_37", "sm_50", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80"),
    ("1.8", "10.1"): _SM_K35_TO_TURING,
    ("1.8", "10.2"): (*_SM_KEPLER_TO_TURING, "compute_37"),
    ("1.8", "11.1"): _SM_TO_AMPERE,
    ("1.9", "10.2"): _SM_KEPLER_TO_TURING,
    ("1.9", "11.1"): _SM_TO_AMPERE,
    ("1.10", "10.2"): _SM_K35_TO_TURING,
    ("1.10", "11.1"): _SM_K35_TO_AMPERE,
    ("1.10", "11.3"): _SM_K35_TO_AMPERE,
    ("1.11", "10.2"): _SM_K35_TO_TURING,
    ("1.11", "11.3"): _SM_K35_TO_AMPERE,
    ("1.11", "11.5"): _SM_TO_AMPERE,
    ("1.12", "10.2"): ("sm_35", *_SM_KEPLER_TO_TURING),
    ("1.12", "11.6"): _SM_TO_AMPERE,
    ("1.13", "11.7"): _SM_TO_AMPERE,
    # 2.0 and 2.1's build script: Kepler's sm_37 with every CUDA 11 build, Hopper from 11.8 on; 2.2 to 2.4's: Maxwell
    # to Ampere, sm_37 still in the CUDA 11 builds, sm_90 from 11.8 on (pytorch/builder's manywheel/build_cuda.sh)
    ("2.0", "11.7"): ("sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"),
    ("2.0", "11.8"): ("sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    ("2.1", "11.8"): ("sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    ("2.1", "12.1"): ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    ("2.2", "11.8"): ("sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    ("2.2", "12.1"): ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    ("2.3", "11.8"): ("sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    ("2.3", "12.1"): ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    ("2.4", "11.8"): ("sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    ("2.4", "12.1"): ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    ("2.4", "12.4"): ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    ("2.5", "11.8"): ("sm_37", *_SM_MAXWELL_TO_HOPPER),
    ("2.5", "12.1"): (*_SM_MAXWELL_TO_HOPPER, "sm_90a"),
    ("2.5", "12.4"): (*_SM_MAXWELL_TO_HOPPER, "sm_90a"),
    ("2.6", "11.8"): ("sm_37", *_SM_MAXWELL_TO_HOPPER),
    ("2.6", "12.4"): _SM_MAXWELL_TO_HOPPER,
    ("2.6", "12.6"): _SM_MAXWELL_TO_HOPPER,
    ("2.7", "11.8"): ("sm_37", *_SM_MAXWELL_TO_HOPPER),
    ("2.7", "12.6"): _SM_MAXWELL_TO_HOPPER,
    ("2.7", "12.8"): _SM_TURING_TO_BLACKWELL,
    # 2.8's build script: Maxwell and Pascal only in the 12.6 builds, Volta back in 12.8 and 12.9
    ("2.8", "12.6"): ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    ("2.8", "12.8"): ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
    ("2.8", "12.9"): ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
    ("2.9", "12.6"): ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    ("2.9", "12.8"): ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
    ("2.9", "13.0"): ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
    ("2.13", "12.6"): ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    ("2.13", "12.9"): _SM_TURING_TO_BLACKWELL,
    ("2.13", "13.0"): _SM_TURING_TO_BLACKWELL,
    ("2.13", "13.2"): _SM_TURING_TO_BLACKWELL,
    ("2.14", "12.6"): ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    ("2.14", "13.0"): _SM_TURING_TO_BLACKWELL,
    ("2.14", "13.2"): _SM_TURING_TO_BLACKWELL,
}


# The first release with a build whose kernels run on a GPU of each compute-capability major (a cubin runs on its own
# major only): Ampere's sm_80 came with 1.7's CUDA 11.0 build, Hopper's sm_90 with 2.0's CUDA 11.8 build, Blackwell's
# sm_100 and sm_120 with 2.7's CUDA 12.8 build (RELEASE.md's matrix; the tables above). No build of an older release
# runs on such a GPU, whatever its CUDA, so a named GPU settles it where the release's own arch list is not known.
FIRST_RELEASE_FOR_MAJOR: dict[int, str] = {8: "1.7", 9: "2.0", 10: "2.7", 12: "2.7"}


def release_predates(torch_version: str, capability: str) -> bool:
    """Whether `torch_version` is older than every release with kernels for a GPU of `capability`."""
    major = version_tuple(capability)[:1]
    first = FIRST_RELEASE_FOR_MAJOR.get(major[0]) if major else None
    have = version_tuple(torch_version)[:2]
    return first is not None and len(have) == 2 and have < version_tuple(first)


def arch_list_for(torch_version: str, cuda: str) -> tuple[str, ...] | None:
    """The published arch list of torch `torch_version` built with CUDA `cuda`, when the table knows it."""
    cuda_key = ".".join(str(p) for p in version_tuple(cuda)[:2])
    return ARCH_LISTS.get((release_of(torch_version), cuda_key))


def arch_supports(arch_list: list[str] | tuple[str, ...], capability: str) -> bool:
    """Whether a device of compute capability "8.6" can run a build with `arch_list`.

    The rule torch itself applies (torch/cuda/__init__.py `_check_cubins`): a cubin for sm_XY runs on devices of the
    same major X with minor >= Y. PTX entries (compute_XY) are ignored, as torch ignores them, because JIT-compiling
    a whole PyTorch from PTX is not a working set-up.
    """
    cap = version_tuple(capability)
    if len(cap) < 2:
        return False
    for arch in arch_list:
        if not arch.startswith("sm_"):
            continue
        digits = arch[3:].rstrip("af")
        if not digits.isdigit():
            continue
        code = int(digits)
        if code // 10 == cap[0] and code % 10 <= cap[1]:
            return True
    return False


# --- CUDA runtime errors seen at initialisation -----------------------------------------------------------------------
# Source: CUDA Runtime API, "Data types: enum cudaError" (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html);
# 38 is cudaErrorNoDevice's number before CUDA 10.1 (old THCudaCheck messages). The explanations and fixes are the ones
# the maintainers gave in the corpus threads (pytorch#88639, DeepVAC/TorchPod#43, NVIDIA/nvidia-docker#1515) and in
# NVIDIA's Fabric Manager user guide.
class CudaError(msgspec.Struct, frozen=True):
    name: str
    text: str  # the runtime's message, as people paste it
    meaning: str
    fix: str


# Error 802 on an NVSwitch machine: the Fabric Manager is missing, stopped, or of another version than the driver. A
# machine that never had it (the trial's case) has no unit to enable: the package of the driver's branch comes first.
FABRIC_MANAGER_FIX = (
    "systemctl status nvidia-fabricmanager   # 'could not be found': install the driver branch's package first,\n"
    "# e.g. on Ubuntu: sudo apt-get install nvidia-fabricmanager-<branch>  (the driver's major version, e.g. 535)\n"
    "sudo systemctl enable --now nvidia-fabricmanager   # its version must equal the driver's (nvidia-smi)"
)


CUDA_ERRORS: dict[int, CudaError] = {
    2: CudaError(
        "cudaErrorMemoryAllocation",
        "out of memory",
        "CUDA could not even create its context: another process holds the GPU's memory",
        "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv   # then stop the process",
    ),
    3: CudaError(
        "cudaErrorInitializationError",
        "initialization error",
        "the driver could not be initialised; after a fork, CUDA cannot be used in the child process",
        "import multiprocessing as mp; mp.set_start_method('spawn')   # or initialise CUDA only in the children",
    ),
    35: CudaError(
        "cudaErrorInsufficientDriver",
        "CUDA driver version is insufficient for CUDA runtime version",
        "the NVIDIA driver is older than the CUDA runtime that torch was built with",
        "upgrade the NVIDIA driver, or install the torch build for the CUDA your driver supports",
    ),
    38: CudaError(
        "cudaErrorNoDevice",
        "no CUDA-capable device is detected",
        "CUDA sees no device: CUDA_VISIBLE_DEVICES hides them, or none is reachable from this process",
        "echo $CUDA_VISIBLE_DEVICES; nvidia-smi -L   # compare the two",
    ),
    46: CudaError(
        "cudaErrorDevicesUnavailable",
        "all CUDA-capable devices are busy or unavailable",
        "the GPUs are in Exclusive-Process compute mode and another process already holds them",
        "nvidia-smi -q -d COMPUTE   # then: sudo nvidia-smi -c DEFAULT, or stop the other process",
    ),
    100: CudaError(
        "cudaErrorNoDevice",
        "no CUDA-capable device is detected",
        "CUDA sees no device: CUDA_VISIBLE_DEVICES hides them, or none is reachable from this process",
        "echo $CUDA_VISIBLE_DEVICES; nvidia-smi -L   # compare the two",
    ),
    209: CudaError(
        "cudaErrorNoKernelImageForDevice",
        "no kernel image is available for execution on the device",
        "the build has no kernels for this GPU's architecture",
        "install a torch build whose get_arch_list() includes the GPU's sm_XY",
    ),
    304: CudaError(
        "cudaErrorOperatingSystem",
        "OS call failed or operation not supported on this OS",
        "an operating-system call of the driver failed or is not allowed where this process runs: a sandbox that "
        "blocks it (an SGX enclave under Gramine, gVisor, a seccomp profile), a container given the device files but "
        "not the driver's libraries, or a VM without the GPU passed through",
        "ls -l /dev/nvidia*   # the device files, as this process sees them\n"
        "python -c 'import torch; print(torch.cuda.is_available())'   # outside the sandbox or container: True\n"
        "# means it blocks CUDA (no GPU exists in an SGX enclave; gVisor needs --nvproxy; docker needs --gpus all)",
    ),
    802: CudaError(
        "cudaErrorSystemNotReady",
        "system not yet initialized",
        "on NVSwitch systems (HGX/DGX A100, H100, H200) CUDA waits for the Fabric Manager, which is not running "
        "or does not match the driver version",
        FABRIC_MANAGER_FIX,
    ),
    803: CudaError(
        "cudaErrorSystemDriverMismatch",
        "system has unsupported display driver / cuda driver combination",
        "the CUDA forward-compatibility libraries (cuda-compat) loaded do not match the kernel driver",
        "remove /usr/local/cuda/compat from LD_LIBRARY_PATH, or install the cuda-compat package matching the driver",
    ),
    804: CudaError(
        "cudaErrorCompatNotSupportedOnDevice",
        "forward compatibility was attempted on non supported HW",
        "a newer CUDA user-space (cuda-compat libraries, often mounted by a container runtime) is used on a GPU "
        "that does not support forward compatibility (GeForce/consumer boards)",
        "remove /usr/local/cuda/compat from LD_LIBRARY_PATH, or update/downgrade the NVIDIA container toolkit so it "
        "mounts the host driver's libraries (NVIDIA/nvidia-docker#1515)",
    ),
    999: CudaError(
        "cudaErrorUnknown",
        "unknown error",
        "the driver's state is broken, most often after the machine was suspended and resumed",
        "sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm   # or reboot",
    ),
}

# Message fragments that identify an error when no number is pasted (old torch prints only the text).
CUDA_ERROR_TEXTS: dict[str, int] = {
    "cuda unknown error": 999,
    "unknown error": 999,
    "forward compatibility was attempted": 804,
    "system not yet initialized": 802,
    "unsupported display driver / cuda driver combination": 803,
    "driver version is insufficient": 35,
    "no cuda-capable device is detected": 100,
    "all cuda-capable devices are busy or unavailable": 46,
    "no kernel image is available": 209,
}

# Error codes that mean "no device": who hid the devices decides the finding (cuda-visible-devices or no-gpu-visible).
NO_DEVICE_ERRORS = frozenset({38, 100})


# --- Apple's GPU (MPS): the macOS each torch release needs ---------------------------------------------------------
# (first release, minimum macOS), oldest first. Sources: torch 1.12's release notes (MPS, macOS 12.3+); pytorch#133141
# (2.5: the macOS 12 code paths removed, 13.0 the minimum; its error still said 12.3+, pytorch#139425); pytorch#163515
# (2.10: "PyTorch needs MacOS-14 or newer to use MPS"; its error said 13.0+, pytorch#164943).
MPS_MIN_MACOS: tuple[tuple[tuple[int, int], str], ...] = (((1, 12), "12.3"), ((2, 5), "13.0"), ((2, 10), "14.0"))
MPS_FIRST_RELEASE = MPS_MIN_MACOS[0][0]


def mps_min_macos(torch_version: str) -> str | None:
    """The macOS that MPS needs in torch `torch_version`; None before MPS (1.12) or for an unreadable version."""
    release = version_tuple(torch_version)[:2]
    if len(release) < 2 or release < MPS_FIRST_RELEASE:
        return None
    return [macos for first, macos in MPS_MIN_MACOS if release >= first][-1]


def newest_mps_release_for(macos: str) -> str | None:
    """The pip specifier of the newest torch whose MPS runs on `macos` ("torch<2.10" on macOS 13.x); None when no
    release's MPS does (below 12.3) or every one does."""
    have = version_tuple(macos)
    if have < version_tuple(MPS_MIN_MACOS[0][1]):
        return None
    too_new = next((first for first, needs in MPS_MIN_MACOS if have < version_tuple(needs)), None)
    return f"torch<{too_new[0]}.{too_new[1]}" if too_new else None
