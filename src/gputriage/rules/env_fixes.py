"""The fixes and plain-words explanations of the rung-1 rules: complete install commands, driver upgrades, absence.

Every install fix first removes the wrong build (pip keeps an installed +cpu wheel: "Requirement already satisfied";
conda's cpuonly pins later solves to CPU builds), moves the companions seen in the report (torchvision, torchaudio,
xformers) to the same variant, and pins versions that exist in the release tables.
"""

from __future__ import annotations

import re

from gputriage.data.cuda_tables import (
    ARCH_LISTS,
    MPS_FIRST_RELEASE,
    TORCH_RELEASES,
    arch_supports,
    min_driver_for,
    mps_min_macos,
    release_of,
    version_tuple,
)
from gputriage.data.gpu_names import capability_of
from gputriage.record.environment import Environment
from gputriage.rules.env_facts import (
    WHEEL_INDEX,
    WSL_GPU_WINDOWS_BUILD,
    ArchBuild,
    Variant,
    amd_gpu,
    arch_builds,
    blackwell_variant,
    cuda_variant_for,
    driver_cuda,
    driver_needed,
    driver_version,
    has_error,
    install_lines,
    major_version,
    nvidia_devices,
    old_windows_for_wsl_gpu,
    pip_install,
    python_note,
    runs_on_driver,
    sm_name,
    uninstall_lines,
    wheel_tag,
)

EXTRA_INDEX_NOTE = (
    "# --index-url, not --extra-index-url: pip takes the highest version from any index,\n"
    "# and PyPI's torch (CPU-only on Windows and macOS) can win."
)


JETSON_WHEELS = "https://developer.download.nvidia.com/compute/redist/jp/"
# The one Python that NVIDIA's torch wheels of each JetPack generation are built for ("PyTorch for Jetson": cp36 on
# JetPack 4, cp38 on 5, cp310 on 6); a wheel for another Python does not install.
JETPACK_PYTHON = {4: "3.6", 5: "3.8", 6: "3.10"}
# The CUDA each generation ships (JetPack 4: 10.0-10.2, 5: 11.4, 6: 12.2-12.6), when the text gives no other mark.
_JETPACK_OF_CUDA = {"10": 4, "11": 5, "12": 6}
_MPS_CHECK = 'python -c "import torch; print(torch.backends.mps.is_available())"   # must print True\n'


_PYTHON_RUN = re.compile(r"(?<![\w.\\/-])python(?= -m pip\b| -c )")


def for_the_jobs_python(fix: str, env: Environment) -> str:
    """The fix's `python -m pip` / `python -c` run by the Python the report shows the job using (ComfyUI portable's
    `.\\python_embeded\\python.exe`): the first `python` on PATH installs into another one. In a uv project, pip
    through uv, and the project's own settings that `uv sync` would otherwise put back."""
    if (env.host.uv_project or env.host.uv_venv) and "python -m pip install" in fix:
        return _through_uv(fix, project=bool(env.host.uv_project))
    py = env.host.python_command
    if not py or not _PYTHON_RUN.search(fix):
        return fix
    if any(ch.isspace() for ch in py):  # a path with spaces needs the shell's own quoting: said, not spliced in
        return f"{fix}\n# run these with the Python the job uses ({py}), not the first python on PATH"
    return _PYTHON_RUN.sub(lambda _: py, fix)


def _through_uv(fix: str, *, project: bool) -> str:
    """uv's venvs have no pip (`python -m pip` fails there), and the next `uv sync` reinstalls what pyproject.toml
    pins: the same commands through `uv pip`, for now, and the project's index for torch, to keep."""
    fix = fix.replace("python -m pip uninstall -y ", "uv pip uninstall ").replace(
        "python -m pip install ", "uv pip install "
    )
    index = re.search(r"--index-url (\S+)", fix)
    if index is None or not project:  # a venv of `uv pip` alone has no pyproject.toml for `uv sync` to restore
        return fix
    url = index.group(1)
    name = "pytorch-" + url.rstrip("/").rsplit("/", 1)[-1]
    return (
        f"{fix}\n# a uv project: the next `uv sync` puts back what pyproject.toml pins; keep this build with:\n"
        f'# [[tool.uv.index]]\n# name = "{name}"\n# url = "{url}"\n# explicit = true\n'
        f'# [tool.uv.sources]\n# torch = {{ index = "{name}" }}\n# then: uv sync'
    )


def mps_fix(env: Environment) -> str:
    """macOS: no NVIDIA driver since 10.14, so no CUDA; Apple's GPU through MPS where this torch and macOS have it.
    Every line pastes into a shell; the change to the script is a comment."""
    head = "# macOS 10.14 and later have no NVIDIA driver, so no CUDA"
    if env.host.rosetta:
        return (
            "# this Python is x86_64 (Intel) and runs under Rosetta on an Apple silicon Mac: torch sees an Intel Mac\n"
            "# and an old macOS (10.16), so MPS is unavailable or falls short of what this macOS has\n"
            'python -c "import platform; print(platform.machine())"   # must print arm64\n'
            "# install an arm64 Python (Miniforge's arm64 installer, or python.org's universal2), then torch in it:\n"
            "python -m pip install torch torchvision torchaudio\n"
            f"{_MPS_CHECK}# then, in the script: device = torch.device('mps')"
        )
    use = "# then, in the script: device = torch.device('mps')   (or --device mps where the tool takes a device)"
    version = env.torch.version
    old = version and version_tuple(version)[:2] < MPS_FIRST_RELEASE
    if not old:
        needs = mps_min_macos(version) if version else None
        macos = f"macOS {needs}+ for torch {version}" if needs else "macOS 12.3+; 13.0+ from torch 2.5, 14.0+ from 2.10"
        return f"{head}: use Apple's GPU through MPS (torch 1.12+, {macos}) instead\n{_MPS_CHECK}{use}"
    return (
        f"{head}; torch {env.torch.version} predates MPS (torch 1.12+, macOS 12.3+)\n"
        "python -m pip install --upgrade torch   # on macOS 12.3 or later\n"
        f"{_MPS_CHECK}{use}\n"
        "# on an older macOS: run on the CPU (device = 'cpu'), or on Linux / Windows with an NVIDIA GPU"
    )


def jetson_wheels(env: Environment) -> str:
    """NVIDIA's "PyTorch for Jetson" wheels: built for one JetPack each, the only pip builds with CUDA on a Jetson."""
    jetpack = env.host.jetpack_version
    folder = f"v{jetpack.replace('.', '')}/pytorch/" if jetpack else "v<JetPack version without dots>/pytorch/"
    which = f"JetPack {jetpack}" if jetpack else "your JetPack (cat /etc/nv_tegra_release gives the L4T release)"
    return (
        f"# a Jetson needs NVIDIA's torch built for {which}: the aarch64 wheels of PyPI and pytorch.org have no\n"
        "# kernels for a Jetson's GPU (most have no CUDA at all)\n"
        "python -m pip uninstall -y torch torchvision torchaudio\n"
        f"# pick the torch-*.whl for your Python from {JETSON_WHEELS}{folder}\n"
        f"python -m pip install --no-cache {JETSON_WHEELS}{folder}<torch-...-linux_aarch64.whl>\n"
        "# or use NVIDIA's l4t-pytorch container for this L4T release (torchvision is built from source to match)"
    ) + _jetson_python_note(env)


def jetpack_generation(env: Environment) -> int | None:
    """4, 5 or 6: from the JetPack version, the L4T or kernel release, else the CUDA the machine shows."""
    h = env.host
    if h.jetpack_version:
        return int(h.jetpack_version.split(".")[0])
    if h.jetpack_major:
        return h.jetpack_major
    cuda = env.driver.cuda_driver_version or h.cuda_toolkit_version
    return _JETPACK_OF_CUDA.get(cuda.split(".")[0]) if cuda else None


def _jetson_python_note(env: Environment) -> str:
    generation = jetpack_generation(env)
    wheel_python = JETPACK_PYTHON.get(generation) if generation else None
    have = env.host.python_version
    if not (wheel_python and have) or version_tuple(have)[:2] == version_tuple(wheel_python)[:2]:
        return ""
    short = ".".join(have.split(".")[:2])
    return (
        f"\n# NVIDIA's wheels for JetPack {generation} are built for Python {wheel_python} only, and this environment"
        f" has Python {short}:\n"
        f"# install them into a Python {wheel_python} environment (conda create -n jetson python={wheel_python}),"
        " or use the container"
    )


def cpu_build_fix(env: Environment, presence: str) -> str:
    if env.host.os_name == "darwin":
        return mps_fix(env)
    if env.host.jetson:
        return jetson_wheels(env)
    lines = ["# nothing to change here; on a machine with an NVIDIA GPU:"] if presence == "none" else []
    variant = cuda_variant_for(env)
    if variant is None:
        lines.append(f"# no published CUDA build runs on driver {driver_version(env)}: upgrade the driver first")
        return "\n".join(lines)
    lines += uninstall_lines(env)
    lines += install_lines(env, variant)
    lines += python_note(env, variant_release(variant))
    lines += _cpu_companions_note(env, variant)
    limit = driver_cuda(env)
    if limit is None:
        lines.append(f"# needs {driver_needed(variant.cuda, env)}: check with nvidia-smi")
        lines += _blackwell_note(env, variant)
    elif variant.minor_compat:
        lines.append(
            f"# CUDA {variant.cuda} runs on driver {driver_version(env) or ''} (CUDA {limit}) through minor version "
            "compatibility; a driver upgrade gives the full support"
        )
    else:
        driver = f"driver {driver_version(env)}" if driver_version(env) else "the driver"
        lines.append(f"# CUDA {variant.cuda}: the newest build that {driver} (CUDA {limit}) runs")
    if any("--index-url" in line for line in lines):
        lines.append(EXTRA_INDEX_NOTE)
    return "\n".join(lines)


def driver_fix(env: Environment, need: str | None) -> str:
    target = f">= {need}" if need else "one that supports this build's CUDA"
    if env.host.jetson:
        return (
            "# on a Jetson the driver's CUDA comes with JetPack (L4T) and cannot be upgraded alone: flash a newer\n"
            "# JetPack, or use a torch built for the CUDA of this one\n" + jetson_wheels(env)
        )
    if has_error(env, "container-cuda-requirement") or (env.host.in_container and env.torch.version is None):
        return (
            f"# upgrade the host's NVIDIA driver to {target} (https://www.nvidia.com/Download/index.aspx),\n"
            f"# or run an image built for the CUDA the host driver supports (CUDA {driver_cuda(env) or '?'}):\n"
            "nvidia-smi   # on the host: 'CUDA Version' is the newest CUDA an image may use"
        )
    if env.host.runtime == "colab":  # the runtime's driver is Google's: only the torch can change
        lines = [
            "# on Colab the driver comes with the runtime and cannot be upgraded: use the torch Colab installs",
            "# (Runtime > Disconnect and delete runtime, then install no other torch over it), or the build",
            "# for the CUDA the runtime's driver supports (in a notebook cell, put ! before each command):",
        ]
    else:
        lines = [
            f"# upgrade the NVIDIA driver to {target} (https://www.nvidia.com/Download/index.aspx), or keep it and"
        ]
        lines.append("# replace the build with the one for the CUDA your driver supports:")
    # torch answering False with a build that minor version compatibility should carry on this driver shows it does
    # not: another build that would need it is no way out (a trial: cu118 offered as "the CUDA your driver supports"
    # beside a failing cu113 on a CUDA 11.2 driver)
    build = env.torch.cuda_version
    compat_failed = env.torch.is_available is False and build is not None and runs_on_driver(build, driver_cuda(env))
    variant = cuda_variant_for(env, exact_only=compat_failed == "compat")
    if variant is None:
        lines.append("# (no published build runs on this driver: the upgrade is the fix)")
        return "\n".join(lines)
    return "\n".join(
        [*lines, *uninstall_lines(env), *install_lines(env, variant), *python_note(env, variant_release(variant))]
    )


def variant_release(variant: Variant) -> str:
    """The release a variant installs: its pinned version's, else the newest (an unpinned `pip install torch`)."""
    return release_of(variant.torch_version) if variant.torch_version else max(TORCH_RELEASES, key=version_tuple)


def arch_fix(env: Environment, capability: str | None) -> str:
    if env.host.jetson:  # no pytorch.org or PyPI wheel has a Jetson's kernels (sm_53, sm_62, sm_72, sm_87)
        return jetson_wheels(env)
    if capability is None:
        return _arch_fix_for_an_unknown_gpu(env)
    sm = sm_name(capability)
    builds = arch_builds(capability, env)
    if not builds:
        return _too_old_or_source_build(capability, sm)
    best = builds[0]
    release, cuda, command = best.release, best.cuda, best.command(env)
    lines = [*uninstall_lines(env), command] if not command.startswith("conda") else [command]
    limit = driver_cuda(env)
    if limit is None:
        lines.append(f"# CUDA {cuda} needs {driver_needed(cuda, env)}")
        lines += _older_driver_build(env, builds, best)
    elif best.runs == "compat":
        lines.append(
            f"# torch {release} + CUDA {cuda} has {sm} kernels; the driver (CUDA {limit}) runs it through CUDA "
            f"{major_version(cuda)}.x minor version compatibility"
        )
    else:
        newer = next((b for b in builds if version_tuple(b.release) > version_tuple(release)), None)
        also = (
            f"; torch {newer.release} + CUDA {newer.cuda} has them too, through CUDA {major_version(newer.cuda)}.x "
            "minor version compatibility"
            if newer
            else ""
        )
        lines.append(
            f"# torch {release} + CUDA {cuda}: the newest build with {sm} kernels for the driver's CUDA {limit}{also}"
        )
    lines += _old_conda_python(release)
    lines += python_note(env, release)
    lines += _companions_note(env, release)
    return "\n".join(lines)


def _older_driver_build(env: Environment, builds: list[ArchBuild], best: ArchBuild) -> list[str]:
    """With the driver unknown and the build in the newest CUDA major (whose drivers are new: cu130 wants 580), the
    build of the major below that has the GPU's kernels (an RTX 50xx: cu12x runs on the 570s, common on new
    machines)."""
    # the CUDA major just below the build's (one CUDA major's older drivers run it through minor version
    # compatibility), its oldest CUDA in the newest release that has one: cu128 beside a 5090's cu130, not a 2019
    # release beside a P100's cu126
    major = version_tuple(best.cuda)[0]
    if major < max(version_tuple(cuda)[0] for _, cuda in ARCH_LISTS):
        return []  # a driver of an older CUDA major is widespread: no alternative to name
    fits = [b for b in builds if version_tuple(b.cuda)[0] == major - 1]
    if not fits:
        return []
    newest = max(version_tuple(b.release) for b in fits)
    fits = [b for b in fits if version_tuple(b.release) == newest]
    other = min(fits, key=lambda b: version_tuple(b.cuda))
    exact = min_driver_for(other.cuda, env.host.os_name)
    return [
        f"# with an older driver (from {exact or 'the one CUDA ' + other.cuda + ' needs'}): torch {other.release} + "
        f"CUDA {other.cuda} has the kernels too:",
        f"# {other.command(env)}",
    ]


_ARCH_CHECK = 'python -c "import torch; print(torch.cuda.get_arch_list(), torch.cuda.get_device_capability())"'
_EXTENSION_NOTE = "# if it is there, a compiled extension (not torch) lacks it: rebuild it with TORCH_CUDA_ARCH_LIST"


def _arch_fix_for_an_unknown_gpu(env: Environment) -> str:
    """The GPU is not named: the check that tells, and, where the driver is known, the newest CUDA build of the user's
    release that it runs (a newer CUDA carries the newer GPUs' kernels: 1.12.0+cu102 on an Ampere card with a CUDA
    11.4 driver needs 1.12.0+cu113), not "the newest release", which that driver may not run."""
    limit = driver_cuda(env)
    variant = cuda_variant_for(env) if limit is not None else None
    built = env.torch.cuda_version
    if variant is None or (built is not None and version_tuple(variant.cuda)[:2] <= version_tuple(built)[:2]):
        return (
            f"{_ARCH_CHECK}\n"
            "# if the GPU's sm_XY is missing from the list: install a build that has it (the newest release the driver "
            "runs);\n" + _EXTENSION_NOTE
        )
    lines = [
        _ARCH_CHECK,
        f"# if the GPU's sm_XY is missing from the list: the newest CUDA build the driver (CUDA {limit}) runs has the",
        "# newer GPUs' kernels:",
        *uninstall_lines(env),
        *install_lines(env, variant),
        _EXTENSION_NOTE,
    ]
    return "\n".join(lines)


def _blackwell_note(env: Environment, variant: Variant) -> list[str]:
    """With the GPU unknown, the build chosen for the oldest driver may lack Blackwell's kernels: name the one that has
    them."""
    if any(d.compute_capability for d in nvidia_devices(env)):
        return []
    named = [capability_of(g) for g in env.host.gpus_named or ([env.host.gpu_named] if env.host.gpu_named else [])]
    if named and all(c is not None and version_tuple(c) < (10, 0) for c in named):
        return []  # the GPUs the report names are older than Blackwell (an RTX 2070 said in a set-up list)
    release = variant_release(variant)
    archs = ARCH_LISTS.get((release, variant.cuda))
    other = blackwell_variant(release)
    if archs is None or arch_supports(archs, "12.0") or other is None:
        return []
    return [
        f"# an RTX 50xx or B200 (Blackwell) needs the CUDA {other} build: "
        f"--index-url {WHEEL_INDEX}/{wheel_tag(other)}, with {driver_needed(other, env)}"
    ]


def _companions_note(env: Environment, release: str) -> list[str]:
    """A new torch release takes torchvision and torchaudio of that release; the command above moves the ones the
    report lists, and this says so for the ones it does not show."""
    t = env.torch
    own = version_tuple(t.version)[:2] if t.version else None
    if own == version_tuple(release)[:2] or all(n in t.companions for n in ("torchvision", "torchaudio")):
        return []
    return [f"# torchvision / torchaudio, where installed: add them to that command, for the ones of torch {release}"]


def _cpu_companions_note(env: Environment, variant: Variant) -> list[str]:
    """torchvision / torchaudio installed beside a CPU torch came from the same CPU index: left in place, a CPU
    torchvision beside a CUDA torch fails at import (torchvision::nms). The report did not list them: the same two
    commands with them, as the install line writes companions (the versions published with that torch, and the
    wheel's CUDA tag where the index needs it), commented out, for where they are installed."""
    t = env.torch
    missing = [n for n in ("torchvision", "torchaudio") if n not in t.companions]
    if not missing:
        return []
    names = ["torch", *[n for n in ("torchvision", "torchaudio", "xformers") if n in t.companions], *missing]
    command = pip_install(variant.torch_version, variant.cuda, [*t.companions, *missing], None, env.host.os_name)
    return [
        f"# {' and '.join(missing)}, where installed, are CPU builds too: replace them with torch instead:",
        f"# python -m pip uninstall -y {' '.join(dict.fromkeys(names))}",
        f"# {command}",
    ]


# Conda's packages of these releases were built for Pythons up to this one: in a newer Python the command cannot solve.
_CONDA_PYTHON_UP_TO = {"1.3": "3.7"}


def _old_conda_python(release: str) -> list[str]:
    python = _CONDA_PYTHON_UP_TO.get(release)
    if python is None:
        return []
    name = "torch" + release.replace(".", "")
    return [
        f"# pytorch {release} was built for Python <= {python}: in a newer Python, make an env for it first:",
        f"# conda create -n {name} python={python} && conda activate {name}",
    ]


# The last CUDA toolkit that can compile for a compute capability (CUDA release notes: 9.0 dropped Fermi sm_2x,
# 11.0 dropped Kepler sm_30/sm_32): below these a source build with today's CUDA is impossible too.
_LAST_CUDA_FOR = (((3, 0), "8.0"), ((3, 5), "10.2"))


def _too_old_or_source_build(capability: str, sm: str) -> str:
    cc = version_tuple(capability)[:2]
    last = next((cuda for below, cuda in _LAST_CUDA_FOR if cc < below), None)
    if last is None:
        return f'# no published build has {sm} kernels: build from source with TORCH_CUDA_ARCH_LIST="{capability}"'
    return (
        f"# this GPU is too old: no published PyTorch build has {sm} kernels, and CUDA {last} is the last CUDA that\n"
        f"# can compile them: a source build is possible only with CUDA <= {last} and a PyTorch old enough to build\n"
        "# with it; otherwise run on the CPU (device = 'cpu') or use a newer GPU"
    )


WSL_GPU_KERNEL = "5.10.43.3"  # Microsoft's and NVIDIA's minimum WSL 2 kernel for CUDA


def old_wsl_kernel(env: Environment) -> str | None:
    """WSL 2's kernel release when it predates GPU access (an old install that `wsl --update` never reached)."""
    kernel = env.host.wsl_kernel
    return kernel if kernel and version_tuple(kernel) < version_tuple(WSL_GPU_KERNEL) else None


def absence(env: Environment) -> str:
    """What was looked at and found empty, in plain words."""
    h, d = env.host, env.driver
    text = env.source == "text"
    amd = amd_gpu(env)
    said = (
        (bool(d.no_devices_reported), "nvidia-smi reports no devices"),
        (bool(h.virtual_machine), f"it is a {h.virtual_machine} virtual machine, and no GPU is passed through to it"),
        (bool(amd), f"its GPU is an AMD one ({amd})"),
        (bool(h.other_gpus), f"its only graphics are {h.other_gpus[0] if h.other_gpus else ''}"),
        (bool(h.no_gpu_stated), "the report says the machine has no NVIDIA GPU"),
        (text and h.os_name == "darwin", "it is a Mac, and macOS 10.14 and later have no NVIDIA driver, so no CUDA"),
        (text and h.wsl_version == 1, "this is WSL 1 (its kernel, 4.4.0-...-Microsoft), which has no GPU access"),
        (
            text and bool(h.wsl) and old_windows_for_wsl_gpu(env),
            f"this Windows (build {h.windows_build}) predates GPU access in WSL 2: Windows 10 21H2 (build "
            f"{WSL_GPU_WINDOWS_BUILD}) or Windows 11 is the first to give WSL 2 the GPU",
        ),
        (
            text and old_wsl_kernel(env) is not None,
            f"this WSL 2 kernel ({h.wsl_kernel}) is older than {WSL_GPU_KERNEL}, the first that gives WSL the GPU",
        ),
        (text and bool(h.wsl), "WSL does not expose the GPU here (WSL 1, or a Windows driver without WSL support)"),
        (h.runtime == "colab", "the Colab runtime has no GPU attached (Runtime > Change runtime type > GPU)"),
        (
            text and has_error(env, "no-driver"),
            "torch found no NVIDIA driver: no NVIDIA GPU, or its driver is not installed (lspci | grep -i nvidia)",
        ),
    )
    reason = next((words for shown, words in said if shown), None)
    if reason is not None:
        return reason
    parts = ["NVML lists no GPU" if d.nvml_loaded else "no NVIDIA driver is installed"]
    parts.append("there is no /dev/nvidia* device")
    if h.pci_nvidia_devices == 0:
        parts.append("nothing NVIDIA is on the PCI bus")
    if env.torch.device_count == 0:
        parts.append("torch counts 0 CUDA devices")
    return ", ".join(parts)
