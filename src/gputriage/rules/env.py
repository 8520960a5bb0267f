"""Rules for rung 1 (see docs/contract.md's finding catalogue): can this torch reach the GPU?

Registration order is the causal order, which decides the root cause among findings of equal severity: a missing
torch before a broken driver, before a GPU that no one can see, before a build that cannot use it, before the
finer causes (CUDA_VISIBLE_DEVICES, the driver's age, the architecture, a failing CUDA init). Rules that would
only restate what an earlier rule explains stay silent (e.g. "no device" errors when CUDA_VISIBLE_DEVICES hides all).
When the job is meant for another device (--expect-device meta/mps/xpu/cpu), NVIDIA-specific findings are info.
"""

from __future__ import annotations

from collections.abc import Iterator

from gputriage.data.cuda_tables import (
    CUDA_ERRORS,
    NO_DEVICE_ERRORS,
    arch_supports,
    compat_min_driver_for,
    min_driver_for,
    version_tuple,
)
from gputriage.findings import Evidence, Finding, Severity
from gputriage.record import Run
from gputriage.record.device import device_type
from gputriage.record.environment import Environment
from gputriage.rules.env_facts import (
    arch_variant_for,
    build_arch_list,
    cuda_at_most,
    cuda_variant_for,
    driver_cuda,
    driver_needed,
    driver_version,
    expected_kind,
    gpu_presence,
    is_rocm,
    nvidia_devices,
    nvidia_expected,
    nvidia_nodes,
    parse_visible_devices,
)
from gputriage.rules.registry import rule

RUNG = 1
_REBOOT_OR_RELOAD = (
    "sudo reboot\n"
    "# or, with no process using the GPU, reload the kernel modules instead:\n"
    "sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia && nvidia-smi"
)
_EXTRA_INDEX_NOTE = (
    "# --index-url, not --extra-index-url: pip takes the highest version from any index,\n"
    "# and PyPI's torch (CPU-only on Windows and macOS) can win; an installed +cpu wheel\n"
    "# already satisfies torch==X, hence the uninstall first."
)


def _finding(
    run: Run, code: str, title: str, evidence: Evidence, fix: str, *, nvidia: bool = True, keep_none: str = ""
) -> Finding:
    """A rung-1 finding: critical, or info when it is NVIDIA-specific and the job is meant for another device.

    Evidence entries that are None (facts not known) are dropped, except `keep_none`, whose null is the proof.
    """
    severity = Severity.INFO if nvidia and not nvidia_expected(run) else Severity.CRITICAL
    shown = {k: v for k, v in evidence.items() if v is not None or k == keep_none}
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
        install,
        nvidia=False,
    )


@rule
def driver_library_mismatch(run: Run) -> Iterator[Finding]:
    env = _env(run)
    if env is None:
        return
    error = env.driver.nvml_error or ""
    kernel, library = env.host.proc_driver_version, env.driver.driver_version
    versions_differ = bool(kernel and library and kernel != library)
    if "mismatch" not in error.lower() and not versions_differ:
        return
    evidence: Evidence = {"nvml_error": error or None, "kernel_module_version": kernel, "library_version": library}
    yield _finding(
        run,
        "driver-library-mismatch",
        "The NVIDIA driver was upgraded but the old kernel module is still loaded, so NVML and CUDA refuse to start",
        evidence,
        _REBOOT_OR_RELOAD,
    )


@rule
def container_without_gpu(run: Run) -> Iterator[Finding]:
    env = _env(run)
    if env is None or not env.host.in_container or nvidia_devices(env) or nvidia_nodes(env):
        return
    requested = env.host.container_gpu_requested
    nvidia_var = env.env_vars.get("NVIDIA_VISIBLE_DEVICES")
    intent = (
        requested is False
        or nvidia_var is not None
        or (env.host.pci_nvidia_devices or 0) > 0
        or (env.torch.cuda_version is not None and env.source == "probe")
        or device_type(run.expect_device) == "cuda"  # the user said so
    )
    if not intent or requested is True:
        return
    evidence: Evidence = {
        "container": env.host.container_kind,
        "nvidia_device_nodes": 0,
        "gpu_flag_given": requested,
        "NVIDIA_VISIBLE_DEVICES": nvidia_var,
        "pci_nvidia_gpus": env.host.pci_nvidia_devices,
        "cuda_available": env.torch.is_available,
    }
    yield _finding(
        run,
        "container-without-gpu",
        f"This runs inside a {env.host.container_kind or 'a'} container that was started without access to the GPU",
        evidence,
        "# on the host: install the NVIDIA Container Toolkit once, then start the container with the GPUs\n"
        "docker run --gpus all IMAGE ...\n"
        "# Kubernetes: request them in the pod spec: resources.limits: {nvidia.com/gpu: 1}",
    )


@rule
def driver_not_loaded(run: Run) -> Iterator[Finding]:
    env = _env(run)
    if env is None or env.host.in_container or nvidia_devices(env) or is_rocm(env):
        return
    pci = env.host.pci_nvidia_devices
    error = (env.driver.nvml_error or "").lower()
    nvml_says = "driver not loaded" in error or "couldn't communicate" in error
    board_without_driver = (pci or 0) > 0 and not nvidia_nodes(env) and env.driver.nvml_loaded is not True
    if not (board_without_driver or (nvml_says and pci != 0)):
        return
    evidence: Evidence = {"pci_nvidia_gpus": pci, "nvml_error": env.driver.nvml_error, "nvidia_device_nodes": 0}
    yield _finding(
        run,
        "driver-not-loaded",
        "An NVIDIA GPU is installed, but its driver is not loaded, so nothing can use it",
        evidence,
        "sudo modprobe nvidia && nvidia-smi\n"
        "# if modprobe fails: the driver is missing or was built for another kernel (after a kernel update):\n"
        "sudo ubuntu-drivers install   # Ubuntu; elsewhere the distribution's nvidia-driver package, then reboot",
    )


@rule
def no_gpu_visible(run: Run) -> Iterator[Finding]:
    env = _env(run)
    if env is None or gpu_presence(env) != "none" or is_rocm(env):
        return
    evidence: Evidence = {
        "nvml_gpus": len(env.driver.devices),
        "nvml_error": env.driver.nvml_error,
        "nvidia_device_nodes": len(nvidia_nodes(env)),
        "pci_nvidia_gpus": env.host.pci_nvidia_devices,
        "torch_cuda_devices": env.torch.device_count,
        "container": env.host.container_kind,
    }
    expected = expected_kind(run)
    title = (
        f"This machine has no NVIDIA GPU that anything could use: {_absence(env)}"
        if expected == "cuda"
        else f"This machine has no NVIDIA GPU, which is fine: the job is meant to run on {expected}"
    )
    yield _finding(
        run,
        "no-gpu-visible",
        title,
        evidence,
        "# run on a machine (or cloud instance type) that has an NVIDIA GPU, then check with:\nnvidia-smi -L"
        + (
            "\n# this is a container: start it with the GPUs: docker run --gpus all IMAGE ..."
            if env.host.in_container
            else ""
        ),
    )


def _absence(env: Environment) -> str:
    """What was looked at and found empty, in plain words."""
    if env.driver.no_devices_reported:
        return "nvidia-smi reports no devices"
    parts = ["NVML lists no GPU" if env.driver.nvml_loaded else "no NVIDIA driver is installed"]
    parts.append("there is no /dev/nvidia* device")
    if env.host.pci_nvidia_devices == 0:
        parts.append("nothing NVIDIA is on the PCI bus")
    if env.torch.device_count == 0:
        parts.append("torch counts 0 CUDA devices")
    return ", ".join(parts)


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
        "cuda_error": t.init_error_code if t.init_error_code in NO_DEVICE_ERRORS else None,
        "torch_version": t.version,
    }
    first_index = "0" if devices or t.init_error_code in NO_DEVICE_ERRORS else "<index from nvidia-smi -L>"
    finding = _finding(
        run,
        "cuda-visible-devices",
        f"CUDA_VISIBLE_DEVICES={visible.value!r} hides the GPUs from CUDA: {reason}",
        evidence,
        "nvidia-smi -L   # the GPUs that exist, with their indices and UUIDs\n"
        f"export CUDA_VISIBLE_DEVICES={first_index}   # or: unset CUDA_VISIBLE_DEVICES",
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
    uuids = [e for e in entries if not e.isdigit()]
    if uuids and version and (1, 13) <= version_tuple(version)[:2] < (2, 0):
        return f"torch {version} ignores UUID entries and counts 0 devices (pytorch#90543, fixed in 2.0)"
    if ignored:
        return f"CUDA ignores {'; '.join(ignored)}, so it sees {visible} GPU(s)"
    return _reason_without_gpu_list(env, entries) if visible is None else None


def _reason_without_gpu_list(env: Environment, entries: list[str]) -> str | None:
    """A pasted report: the GPU list may be cut, so only "CUDA sees none while GPUs exist" is evidence."""
    no_device = env.torch.init_error_code in NO_DEVICE_ERRORS or env.torch.device_count == 0
    if not no_device or gpu_presence(env) != "present":
        return None
    listed = [str(d.index) for d in nvidia_devices(env)]
    absent = [e for e in entries if e.isdigit() and e not in listed]
    if absent and listed:
        return f"there is no GPU {', '.join(absent)} (the report lists GPU {', '.join(listed)}), so CUDA sees none"
    return "the GPUs exist, yet CUDA reports no device under this setting"


@rule
def cpu_only_build(run: Run) -> Iterator[Finding]:
    env = _env(run)
    if env is None or env.torch.is_cpu_build is not True or env.torch.installed is False:
        return
    presence = gpu_presence(env)
    devices = nvidia_devices(env)
    evidence: Evidence = {
        "torch_version": env.torch.version,
        "torch_cuda": None,
        "gpu": devices[0].name if devices else None,
        "gpus": len(devices) if devices else None,
        "driver_version": driver_version(env),
        "driver_cuda": driver_cuda(env),
        "conda_cpuonly_installed": env.torch.cpuonly_package,
        "install_method": env.torch.install_method,
    }
    finding = _finding(
        run,
        "cpu-only-build",
        _cpu_build_title(env, presence),
        evidence,
        _cpu_build_fix(env, presence),
        keep_none="torch_cuda",
    )
    if presence == "none":
        finding.severity = Severity.INFO  # with no GPU, a CPU build is not the problem (docs/contract.md)
    elif presence == "unknown" and finding.severity is Severity.CRITICAL:
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


def _cpu_build_fix(env: Environment, presence: str) -> str:
    if env.host.os_name == "darwin":
        return "# macOS has no CUDA: use Apple's GPU through MPS instead\ndevice = torch.device('mps')"
    lines = ["# nothing to change here; on a machine with an NVIDIA GPU:"] if presence == "none" else []
    if env.torch.cpuonly_package or env.torch.install_method == "conda":
        lines.append("conda remove -y cpuonly pytorch   # conda's cpuonly pins every later solve to CPU builds")
    else:
        if env.torch.install_method is None:
            lines.append("conda list cpuonly   # in a conda env: if it is listed, `conda remove -y cpuonly` first")
        lines.append("python -m pip uninstall -y torch")
    variant = cuda_variant_for(env)
    if variant is None:
        lines.append(f"# no published CUDA build runs on driver {driver_version(env)}: upgrade the driver first")
        return "\n".join(lines)
    command = variant.command()
    lines.append(command)
    limit = driver_cuda(env)
    if limit is None:
        lines.append(f"# needs {driver_needed(variant.cuda, env)}: check with nvidia-smi")
    elif variant.minor_compat:
        lines.append(
            f"# CUDA {variant.cuda} runs on driver {driver_version(env)} (CUDA {limit}) through minor version "
            "compatibility; a driver upgrade gives the full support"
        )
    else:
        lines.append(f"# CUDA {variant.cuda}: the newest build that driver {driver_version(env)} (CUDA {limit}) runs")
    if "--index-url" in command:
        lines.append(_EXTRA_INDEX_NOTE)
    return "\n".join(lines)


@rule
def driver_too_old(run: Run) -> Iterator[Finding]:
    env = _env(run)
    if env is None or is_rocm(env) or env.torch.is_cpu_build:
        return
    cuda, have = env.torch.cuda_version, driver_version(env)
    insufficient = env.torch.init_error_code == 35
    if cuda is None or (have is None and not insufficient):
        return
    need = min_driver_for(cuda, env.host.os_name)
    floor = compat_min_driver_for(cuda, env.host.os_name)
    limit = driver_cuda(env)
    if not insufficient and (limit is None or cuda_at_most(cuda, limit)):
        return
    works_by_minor_compat = bool(have and floor and version_tuple(have) >= version_tuple(floor)) and not insufficient
    evidence: Evidence = {
        "driver_version": have,
        "driver_cuda": limit,
        "torch_cuda": cuda,
        "torch_cuda_from": env.torch.cuda_version_inferred_from,
        "min_driver_for_torch_cuda": need,
        "cuda_error": 35 if insufficient else None,
    }
    finding = _finding(
        run,
        "driver-too-old",
        f"The NVIDIA driver{_space(have)} is too old for CUDA {cuda}, which torch{_space(env.torch.version)} was "
        f"built with (it needs >= {need})",
        evidence,
        _driver_fix(env, need),
    )
    if works_by_minor_compat and finding.severity is Severity.CRITICAL:
        # CUDA >= 11 runs on an older driver of the same major version, except PTX JIT: a real risk, not a stop.
        finding.severity = Severity.WARNING
        finding.title += "; it runs through CUDA minor version compatibility, but PTX JIT kernels will fail"
    yield finding


def _space(value: str | None) -> str:
    return f" {value}" if value else ""


def _driver_fix(env: Environment, need: str | None) -> str:
    lines = [f"# upgrade the NVIDIA driver to >= {need} (https://www.nvidia.com/Download/index.aspx), or keep it and"]
    lines.append("# install the torch build for the CUDA your driver supports:")
    variant = cuda_variant_for(env)
    lines.append(variant.command() if variant else "# (no published build runs on this driver)")
    return "\n".join(lines)


@rule
def arch_not_supported(run: Run) -> Iterator[Finding]:
    env = _env(run)
    if env is None or is_rocm(env) or env.torch.is_cpu_build:
        return
    archs = build_arch_list(env)
    for device in nvidia_devices(env):
        cc = device.compute_capability
        if cc is None or not _unsupported(env, device.unsupported_by_torch, cc, archs):
            continue
        sm = "sm_" + cc.replace(".", "")
        found = arch_variant_for(cc, env)
        if found and driver_cuda(env) is None:
            found = (found[0], found[1], f"{found[2]}\n# CUDA {found[1]} needs {driver_needed(found[1], env)}")
        fix = (
            found[2]
            if found
            else (f'# no published build has {sm} kernels: build from source with TORCH_CUDA_ARCH_LIST="{cc}"')
        )
        evidence: Evidence = {
            "gpu": device.name,
            "compute_capability": cc,
            "build_arch_list": " ".join(archs) if archs else None,
            "min_capability": env.torch.min_capability,
            "torch_version": env.torch.version,
            "torch_cuda": env.torch.cuda_version,
            "build_with_kernels": f"torch {found[0]} + CUDA {found[1]}" if found else None,
        }
        yield _finding(
            run,
            "arch-not-supported",
            f"This torch build has no kernels for the {device.name} (compute capability {cc}, {sm})",
            evidence,
            fix,
        )


def _unsupported(env: Environment, torch_said: bool | None, cc: str, archs: list[str] | None) -> bool:
    if torch_said:
        return True
    minimum = env.torch.min_capability
    if minimum and version_tuple(cc) < version_tuple(minimum):
        return True
    cubins = [a for a in archs or [] if a.startswith("sm_")]
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
    code = t.init_error_code
    hung = bool(t.init_warning and "did not finish within" in t.init_warning)
    if (code is None and not hung) or (hung and gpu_presence(env) == "none"):
        return  # a slow torch import on a machine without a GPU is not a CUDA hang
    if code in (35, 209):
        return  # driver-too-old and arch-not-supported name these
    if code in NO_DEVICE_ERRORS and (parse_visible_devices(env) is not None or gpu_presence(env) != "present"):
        return  # CUDA_VISIBLE_DEVICES or the absence of any GPU explains "no device"
    known = CUDA_ERRORS.get(code) if code is not None else None
    name = f"error {code} ({known.name})" if known else (f"error {code}" if code is not None else "a hang")
    meaning = known.meaning if known else "CUDA did not answer; the driver is stuck (check dmesg for Xid errors)"
    evidence: Evidence = {"cuda_error": code, "error_name": known.name if known else None, "message": t.init_warning}
    yield _finding(
        run,
        "cuda-init-failed",
        f"CUDA fails to initialise with {name}: {meaning}",
        evidence,
        known.fix if known else "sudo dmesg | grep -i xid   # then reboot; a stuck driver does not recover by itself",
    )


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
    env = _env(run)
    if env is None:
        return
    lost = [d for d in env.driver.devices if d.error and "lost" in d.error.lower()]
    if not lost:
        return
    evidence: Evidence = {
        "lost_gpus": ", ".join(f"{d.index} ({d.pci_bus_id or d.name})" for d in lost),
        "gpus": len(env.driver.devices),
        "nvml_error": lost[0].error,
    }
    finding = _finding(
        run,
        "cuda-init-failed",
        f"{len(lost)} of {len(env.driver.devices)} GPUs fell off the bus (NVML: GPU is lost) and cannot be used",
        evidence,
        "sudo dmesg | grep -i 'xid'   # Xid 79 = fell off the bus; then reboot (power, cooling or PCIe link issue)",
    )
    if len(lost) < len(env.driver.devices) and finding.severity is Severity.CRITICAL:
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
    if t.is_available is not False or t.is_cpu_build or gpu_presence(env) != "present":
        return
    if any(f.severity is not Severity.INFO for r in _SPECIFIC_RULES for f in r(run)):
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
