"""Parse a pasted text (an issue-tracker report) into the same Environment that the probe fills.

The text can mix `python -m torch.utils.collect_env` output (old and new formats, cut short), `nvidia-smi` tables and
errors, Python/IPython sessions, CUDA warnings, shell commands and prose. Each extractor below reads one kind of fact;
the first occurrence of a fact wins (reports quote the failing machine first and follow-ups later). A fact the text
does not give stays None and is listed in `Environment.unknown`: nothing is guessed, and the one inference made (the
CUDA of a plain `pip install torch==X` wheel) is recorded as such.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gputriage.data.cuda_tables import CUDA_ERROR_TEXTS, TORCH_RELEASES, release_of
from gputriage.errors import InputError
from gputriage.record.environment import Environment, GpuDevice

_BINARY_CONTROL_SHARE = 0.05  # more than 5% control characters is not a pasted report
_NOT_COLLECTED = ("could not collect", "n/a", "none", "no cuda", "")
_M = re.MULTILINE
_I = re.IGNORECASE


def parse_environment_text(text: str) -> Environment:
    """Parse a pasted report into an Environment (source "text").

    Raises:
        InputError: the text is empty, binary, or holds no PyTorch, CUDA or nvidia-smi fact at all.
    """
    if not text.strip():
        raise InputError("the text is empty: paste the output of `python -m torch.utils.collect_env` and `nvidia-smi`")
    if _looks_binary(text):
        raise InputError("the input looks binary, not text: give a collect_env / nvidia-smi text file")
    env = Environment(source="text")
    env.torch.probe_mode = "text"
    for extract in _EXTRACTORS:
        extract(text, env)
    _derive_build(text, env)
    if not _has_any_fact(env):
        raise InputError(
            "found no PyTorch, CUDA or nvidia-smi facts in the text: paste the output of "
            "`python -m torch.utils.collect_env` and `nvidia-smi`"
        )
    env.unknown = unknown_facts(env)
    return env


def cuda_error_code(text: str) -> int | None:
    """The CUDA error number a warning or error names ("Error 804: ...", "error=38"), or the one its words identify."""
    match = re.search(r"\berror[ =:]+(\d{1,3})\b|\bCUDA error (\d{1,3})\b", text, _I)
    if match:
        return int(match.group(1) or match.group(2))
    lowered = text.lower()
    for fragment, code in CUDA_ERROR_TEXTS.items():
        if fragment in lowered:
            return code
    return None


# --- collect_env -----------------------------------------------------------------------------------------------------
def _field(text: str, key: str) -> str | None:
    """The value of a `Key: value` line of collect_env; None when absent."""
    match = re.search(rf"^\s*{re.escape(key)}\s*:[ \t]*(.*)$", text, _M | _I)
    return match.group(1).strip() if match else None


def _collected(value: str | None) -> str | None:
    """A collect_env value, or None when collect_env said it could not collect it."""
    if value is None or value.lower() in _NOT_COLLECTED:
        return None
    return value


def _collect_env(text: str, env: Environment) -> None:
    t, h, d = env.torch, env.host, env.driver
    version = _collected(_field(text, "PyTorch version"))
    if version:
        t.version, t.installed = version, True
    built = _field(text, "CUDA used to build PyTorch")
    if built is not None:
        t.cuda_version = _collected(built)
    t.hip_version = _collected(_field(text, "ROCM used to build PyTorch")) or t.hip_version
    available = _field(text, "Is CUDA available")
    if available is not None and available.lower() in ("true", "yes", "false", "no"):
        t.is_available = available.lower() in ("true", "yes")
    h.cuda_toolkit_version = _collected(_field(text, "CUDA runtime version"))
    d.driver_version = _collected(_field(text, "Nvidia driver version"))
    python = _collected(_field(text, "Python version"))
    h.python_version = python.split()[0] if python else None
    h.platform = _collected(_field(text, "Python platform"))
    os_line = _collected(_field(text, "OS"))
    h.os_name = _os_from(os_line or h.platform or "")
    _collect_env_gpus(text, env)


def _collect_env_gpus(text: str, env: Environment) -> None:
    inline = _field(text, "GPU models and configuration")
    gpu_line = r"(?:^\s*|configuration:\s*)GPU (\d+): (.+?)(?:\s*\(UUID: (\S+?)\))?\s*$"
    for match in re.finditer(gpu_line, text, _M):
        env.driver.devices.append(
            GpuDevice(index=int(match.group(1)), name=match.group(2), uuid=match.group(3), source="collect_env")
        )
    if inline and not env.driver.devices and _collected(inline):
        env.driver.devices.append(GpuDevice(index=0, name=inline, source="collect_env"))


def _pip_conda_lists(text: str, env: Environment) -> None:
    """The "Versions of relevant libraries" lines: `[pip3] torch==X`, `[conda] pytorch X py3.8_cpu_0`, `cpuonly`."""
    t = env.torch
    conda = re.search(r"^\[conda\]\s+pytorch\s+(\S+)\s+(\S+)", text, _M)
    if conda:
        t.version = t.version or conda.group(1)
        t.install_method = "conda"
        build = conda.group(2)
        cuda = re.search(r"cuda(\d+\.\d+)", build)
        if cuda and t.cuda_version is None:
            t.cuda_version = cuda.group(1)
        if "cpu" in build:
            t.is_cpu_build = True
    if re.search(r"^\[conda\]\s+cpuonly\b", text, _M):
        t.cpuonly_package, t.install_method = True, "conda"


# --- nvidia-smi ------------------------------------------------------------------------------------------------------
def _nvidia_smi(text: str, env: Environment) -> None:
    d = env.driver
    header = re.search(r"Driver Version:\s*(\d+\.\d+(?:\.\d+)?)(?:\s+CUDA Version:\s*(\d+\.\d+))?", text)
    if header:
        d.driver_version = d.driver_version or header.group(1)
        cuda = header.group(2) or _first(r"CUDA Version:\s*(\d+\.\d+)", text)
        d.cuda_driver_version = d.cuda_driver_version or cuda
    row = re.compile(
        r"^\|\s+(\d+)\s+(.+?)\s+(?:On|Off)\s+\|\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)", _M
    )
    smi_devices = [
        GpuDevice(index=int(m.group(1)), name=m.group(2).strip(), pci_bus_id=m.group(3), source="nvidia-smi")
        for m in row.finditer(text)
    ]
    if smi_devices and not d.devices:
        d.devices = smi_devices
    failed = re.search(r"Failed to initialize NVML:\s*(.+)", text)
    if failed:
        d.nvml_loaded, d.nvml_error = False, failed.group(1).strip()
    library = _first(r"NVML library version:\s*(\S+)", text)
    if library:
        d.driver_version = d.driver_version or library
    if re.search(r"couldn't communicate with the NVIDIA driver", text, _I):
        d.nvml_loaded, d.nvml_error = False, "Driver Not Loaded (nvidia-smi couldn't communicate with the driver)"
    if re.search(r"^\s*No devices were found\s*$", text, _M):
        d.nvml_loaded, d.no_devices_reported = True, True
    if re.search(r"nvidia-smi: (?:command )?not found|'nvidia-smi' is not recognized", text, _I):
        d.nvml_loaded = False
        d.nvml_error = d.nvml_error or "NVML Shared Library Not Found (nvidia-smi is not installed)"
    for m in re.finditer(r"Unable to determine the device handle for GPU\s*([0-9A-Fa-f:.]+):\s*(.+)", text):
        d.devices.append(GpuDevice(index=len(d.devices), name=f"GPU {m.group(1)}", error=m.group(2).strip()))


def _prose_driver(text: str, env: Environment) -> None:
    # "my driver is 410.48", "driver "NVIDIA 455.23.04"": a three-digit branch number close after "driver".
    if env.driver.driver_version is None:
        env.driver.driver_version = _first(r"driver[^\n\d]{0,40}?\b(\d{3}\.\d{1,3}(?:\.\d{1,3})?)\b", text, _I)


# --- torch's warnings and errors -------------------------------------------------------------------------------------
def _cuda_warnings(text: str, env: Environment) -> None:
    t = env.torch
    init = re.search(r"CUDA initialization:\s*(.+?)(?:\s*\(Triggered internally.*)?$", text, _M)
    thc = re.search(r"THCudaCheck FAIL .*?error=(\d+)\s*:\s*(.+)$", text, _M)
    runtime = re.search(r"^\s*RuntimeError: (?:CUDA error: )?(.*(?:CUDA|cuda).*)$", text, _M)
    if init:
        t.init_warning = f"CUDA initialization: {init.group(1).strip()}"
    for match in (thc, runtime):
        if match and t.init_warning is None:
            t.init_warning = match.group(0).strip()
    if t.init_warning:
        t.init_error_code = cuda_error_code(t.init_warning)


def _capability_warnings(text: str, env: Environment) -> None:
    t, devices = env.torch, env.driver.devices
    for m in re.finditer(r"^[>\s]*(.+?) with CUDA capability sm_(\d+)(\d) is not compatible", text, _M):
        _torch_device(devices, name=m.group(1).strip(), capability=f"{m.group(2)}.{m.group(3)}")
    archs = _first(r"The current PyTorch install supports CUDA capabilities ((?:\s*(?:sm|compute)_\d+\w?)+)", text)
    if archs:
        t.arch_list = archs.split()
    found = r"Found GPU(\d+) (.+?) which is of (?:cuda|compute) capability (?:\(CC\) )?(\d+)\.(\d+)"
    for m in re.finditer(found, text, _I):
        _torch_device(devices, name=m.group(2).strip(), capability=f"{m.group(3)}.{m.group(4)}", index=int(m.group(1)))
    t.min_capability = _first(r"minimum cuda capability supported by this library is (\d+\.\d+)", text, _I)


def apply_torch_warnings(text: str, env: Environment) -> None:
    """Mark the GPUs that torch's own capability warnings call unsupported (used by the probe on its captured text)."""
    _capability_warnings(text, env)


def _torch_device(devices: list[GpuDevice], *, name: str, capability: str, index: int | None = None) -> None:
    """Record a device that torch's warning names as unsupported, merging it with one already listed by name."""
    for device in devices:
        if device.name.endswith(name) or name.endswith(device.name):
            device.compute_capability, device.unsupported_by_torch = capability, True
            return
    devices.append(
        GpuDevice(
            index=index if index is not None else len(devices),
            name=name,
            compute_capability=capability,
            source="torch-warning",
            unsupported_by_torch=True,
        )
    )


# --- sessions: `>>> torch.cuda.is_available()` / `python -c '...'` and their printed answers --------------------------
_OTHER_GPU_LIBS = ("cupy", "tensorflow", "tf", "jax", "numba")
_ANSWER = re.compile(r"^\s*(?:Out\[\d+\]:\s*)?(True|False|\d+)\s*$")


def _sessions(text: str, env: Environment) -> None:
    lines = text.splitlines()
    plain: list[bool] = []
    for i, line in enumerate(lines):
        if "is_available()" not in line and "device_count()" not in line:
            continue
        answers = _answers_after(lines, i + 1, max(1, line.count("print(")))
        calls = list(re.finditer(r"(\w+)(?:\.cuda)?\.(is_available|device_count)\(\)", line))
        for call, answer in zip(calls, answers, strict=False):
            owner, what = call.group(1), call.group(2)
            if owner != "torch":
                continue
            if what == "device_count" and answer.isdigit():
                env.torch.device_count = env.torch.device_count if env.torch.device_count is not None else int(answer)
                continue
            if answer not in ("True", "False"):
                continue
            other = _library_used_before(line, call.start())
            if other and answer == "False":
                env.torch.init_conflict = env.torch.init_conflict or other
            else:
                plain.append(answer == "True")
    if plain and env.torch.is_available is None:
        env.torch.is_available = all(plain)
    if plain or env.torch.init_conflict:
        env.torch.installed = True


def _answers_after(lines: list[str], start: int, count: int) -> list[str]:
    """The next `count` printed answers (True/False/numbers), skipping warnings, code fences and source echoes."""
    answers: list[str] = []
    for line in lines[start : start + 12]:
        if len(answers) == count or line.lstrip().startswith(("$", ">>>", "In [")):
            break
        match = _ANSWER.match(line)
        if match:
            answers.append(match.group(1))
    return answers


def _library_used_before(line: str, torch_at: int) -> str | None:
    before = line[: max(torch_at, 0)]
    for lib in _OTHER_GPU_LIBS:
        if re.search(rf"\b{lib}\.\w+", before):
            return lib
    return None


# --- shell commands: env vars, containers, install commands ----------------------------------------------------------
_ENV_ASSIGN = r"\b({name})=(\"[^\"\n]*\"|'[^'\n]*'|[^\s;]*)"
_ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_ORDER")


def _commands(text: str, env: Environment) -> None:
    for name in _ENV_NAMES:
        assign = re.search(_ENV_ASSIGN.format(name=name), text)
        python = re.search(rf"os\.environ\[[\"']{name}[\"']\]\s*=\s*[\"']([^\"']*)[\"']", text)
        if assign:
            env.env_vars[name] = assign.group(2).strip("\"'")
        elif python:
            env.env_vars[name] = python.group(1)
    run = re.search(r"^.*\b(nvidia-docker|docker|podman)\s+run\b.*$", text, _M)
    if run:
        command = run.group(0)
        env.host.in_container = True
        env.host.container_kind = "podman" if run.group(1) == "podman" else "docker"
        env.host.container_gpu_requested = bool(
            run.group(1) == "nvidia-docker" or re.search(r"--gpus\b|--runtime[= ]nvidia|--device[= ]\S*nvidia", command)
        )
    _install_commands(text, env)


def _install_commands(text: str, env: Environment) -> None:
    t = env.torch
    # The command itself, without a prompt before it or prose after a closing backtick.
    pip = re.search(r"\bpip3?\s+install\b[^`\n]*\btorch\b[^`\n]*", text)
    conda = re.search(r"\bconda\s+install\b[^`\n]*\bpytorch\b[^`\n]*", text)
    if pip:
        t.install_command, t.install_method = pip.group(0).strip(), t.install_method or "pip"
        index = _first(r"download\.pytorch\.org/whl/(?:nightly/)?(cpu|cu\d+|rocm[\d.]+)\b", pip.group(0))
        if index == "cpu":
            t.is_cpu_build = True
        elif index and index.startswith("cu") and t.cuda_version is None:
            t.cuda_version = f"{index[2:-1]}.{index[-1]}"
    if conda:
        t.install_command, t.install_method = conda.group(0).strip(), "conda"
        toolkit = _first(r"(?:cudatoolkit|pytorch-cuda)=(\d+\.\d+)", conda.group(0))
        if toolkit and t.cuda_version is None:
            t.cuda_version, t.cuda_version_inferred_from = toolkit, f"the conda command's cudatoolkit={toolkit}"
        if re.search(r"\bcpuonly\b", conda.group(0)):
            t.cpuonly_package = True
    version = _first(r"\btorch\s*={2,3}\s*([0-9][\w.+]*)", text) or _first(r"\bPyTorch (\d+\.\d+\.\d+)\b", text)
    if version:
        t.version, t.installed = t.version or version.rstrip("."), True
    if re.search(r"No module named '?torch'?", text):
        t.installed, t.import_error = False, "ModuleNotFoundError: No module named 'torch'"


def _host_hints(text: str, env: Environment) -> None:
    h = env.host
    banner = re.search(r"^Python (\d+\.\d+\.\d+)\b.*(?:\n.*)?\bon (linux|win32|darwin)", text, _M)
    if banner:
        h.python_version = h.python_version or banner.group(1)
        h.os_name = h.os_name or _os_from(banner.group(2))
    if h.os_name is None:
        h.os_name = _os_from(text)


def _os_from(text: str) -> str | None:
    if re.search(r"\bwin32\b|\bWindows\b|[A-Z]:\\(?:Users|Program)", text):
        return "windows"
    if re.search(r"\bmacOS\b|\bdarwin\b|Mac OSX", text, _I):
        return "darwin"
    if re.search(r"\blinux\b|Ubuntu|Debian|CentOS|Red Hat|Fedora|/usr/|/opt/|/home/", text, _I):
        return "linux"
    return None


# --- what follows from the facts --------------------------------------------------------------------------------------
def _derive_build(text: str, env: Environment) -> None:
    t = env.torch
    local = re.search(r"\+(cpu|cu(\d+)(\d)|rocm[\d.]+)$", t.version or "")
    if local and local.group(1) == "cpu":
        t.is_cpu_build = True
    elif local and local.group(1).startswith("cu"):
        t.cuda_version = t.cuda_version or f"{local.group(2)}.{local.group(3)}"
    elif local:
        t.hip_version = t.hip_version or local.group(1)[4:]
    if t.cpuonly_package:
        t.is_cpu_build = True
    if t.is_cpu_build is None and _field(text, "CUDA used to build PyTorch") is not None and t.version:
        # collect_env prints "Could not collect" exactly when torch.version.cuda is None.
        t.is_cpu_build = t.cuda_version is None and t.hip_version is None
    if t.is_cpu_build is None and (t.cuda_version or t.hip_version):
        t.is_cpu_build = False
    _infer_pypi_wheel(env)


def _infer_pypi_wheel(env: Environment) -> None:
    """A plain `pip install torch==X` on Linux got PyPI's default wheel, whose CUDA the release table gives."""
    t = env.torch
    if t.cuda_version or t.is_cpu_build is not None or not t.version or t.install_method != "pip":
        return
    if "+" in t.version or env.host.os_name != "linux" or "index-url" in (t.install_command or ""):
        return
    release = TORCH_RELEASES.get(release_of(t.version))
    if release is not None and release.pypi_cuda:
        t.cuda_version, t.is_cpu_build = release.pypi_cuda, False
        t.cuda_version_inferred_from = f"the default PyPI wheel of torch {t.version} for Linux"


def _has_any_fact(env: Environment) -> bool:
    t, d, h = env.torch, env.driver, env.host
    return any(
        value is not None
        for value in (
            t.version,
            t.installed,
            t.is_available,
            t.init_warning,
            t.init_conflict,
            d.driver_version,
            d.nvml_error,
            d.no_devices_reported,
            h.in_container,
        )
    ) or bool(d.devices or env.env_vars)


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
    if d.driver_version is None:
        unknown.append("could not tell the NVIDIA driver version (nvidia-smi)")
    if not d.devices and not d.no_devices_reported:
        unknown.append("could not tell which GPUs the machine has (nvidia-smi -L)")
    if t.is_available is None:
        unknown.append("could not tell whether torch.cuda.is_available() is True")
    if "CUDA_VISIBLE_DEVICES" not in env.env_vars:
        unknown.append("could not tell whether CUDA_VISIBLE_DEVICES was set (echo $CUDA_VISIBLE_DEVICES)")
    return unknown


def _first(pattern: str, text: str, flags: int = 0) -> str | None:
    match = re.search(pattern, text, flags)
    return match.group(1) if match else None


def _looks_binary(text: str) -> bool:
    if "\x00" in text:
        return True
    control = sum(1 for ch in text if (ord(ch) < 32 and ch not in "\t\n\r\f\x1b") or ch == "\ufffd")
    return control / len(text) > _BINARY_CONTROL_SHARE


_EXTRACTORS: tuple[Callable[[str, Environment], None], ...] = (
    _collect_env,
    _pip_conda_lists,
    _nvidia_smi,
    _prose_driver,
    _cuda_warnings,
    _capability_warnings,
    _sessions,
    _commands,
    _host_hints,
)

__all__ = ["apply_torch_warnings", "cuda_error_code", "parse_environment_text", "unknown_facts"]
