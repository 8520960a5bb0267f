"""Probe this machine for rung 1: the torch build, the driver and GPUs (NVML), the host, the env vars.

`probe_environment` never raises: every part that fails becomes a fact ("NVML: Driver Not Loaded") or a sentence in
`Environment.unknown`. torch is probed in a child interpreter by default (a broken torch or a CUDA init that hangs
cannot take gputriage down; it costs one torch import, ~2-4 s), and in-process when the caller already imported
torch (`gputriage run` inside the user's process, where the import is already paid and CUDA state must not change).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gputriage.collectors import torch_probe
from gputriage.collectors.env_text import apply_torch_warnings, cuda_error_code
from gputriage.collectors.host import nvcc_version, probe_host, read_env_vars
from gputriage.hardware.nvml import NvmlSession, Unavailable, open_nvml, read_driver
from gputriage.record.environment import DriverFacts, Environment, GpuDevice, HostFacts, TorchFacts

DEFAULT_TIMEOUT_S = 90.0  # a cold torch import on network storage takes tens of seconds; a hung cuInit never ends
_STDERR_TAIL_LINES = 20


def probe_environment(
    expect_device: str | None = None,
    *,
    in_process: bool | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    nvml_lib: Any | None = None,
    host_root: Path | None = None,
    environ: Mapping[str, str] | None = None,
    torch_facts: TorchFacts | None = None,
    machine: Environment | None = None,
    torch_raw: dict[str, Any] | None = None,
) -> Environment:
    """Probe rung 1 on this machine. Never raises.

    Args:
        expect_device: the device the job is meant to use (--expect-device); "cuda" also runs torch's lazy CUDA init
            in the child, so torch's own "not compatible" warnings are captured.
        in_process: probe torch in this process (default: only when torch is already imported).
        timeout_s: the child interpreter's limit; past it, CUDA initialisation is reported as hanging.
        nvml_lib, host_root, environ, torch_facts: replacements for the real NVML, "/", os.environ and the torch
            probe, for tests.
        machine: the machine's part (`probe_machine`), probed earlier (by `run`'s report worker, while the job ran).
        torch_raw: torch's own answers (`torch_probe.collect`) from the job's process, where torch is imported.
    """
    env = machine if machine is not None else probe_machine(nvml_lib=nvml_lib, host_root=host_root, environ=environ)
    if torch_facts is None:
        if torch_raw is not None:
            raw = torch_raw
            torch_facts = _guard(env, "the torch build", lambda: _in_process_facts(raw), TorchFacts())
        else:
            run_in_process = ("torch" in sys.modules) if in_process is None else in_process
            torch_facts = _guard(
                env, "the torch build", lambda: probe_torch(run_in_process, timeout_s, expect_device), TorchFacts()
            )
        facts = torch_facts
        _guard(env, "how torch was installed", lambda: _add_install_facts(facts), None)
    env.torch = torch_facts
    if torch_facts.init_warning:
        # torch's "sm_120 is not compatible" / "Found GPU0 ... too old" name the GPUs it cannot use.
        _guard(env, "torch's warnings", lambda: apply_torch_warnings(torch_facts.init_warning or "", env), None)
    env.unknown.extend(_unknown_facts(env))
    return env


def probe_machine(
    *, nvml_lib: Any | None = None, host_root: Path | None = None, environ: Mapping[str, str] | None = None
) -> Environment:
    """The part of rung 1 that does not ask torch: the host, the environment variables, the CUDA toolkit, NVML.

    It touches no CUDA state of any process, so `run` probes it in its report worker while the job starts.
    """
    env = Environment(source="probe")
    env.host = _guard(env, "the host", lambda: probe_host(host_root or Path("/"), environ), HostFacts())
    env.env_vars = read_env_vars(environ)
    if host_root is None:
        env.host.cuda_toolkit_version = _guard(env, "the CUDA toolkit", lambda: nvcc_version(environ), None)
    env.driver = _guard(env, "the driver through NVML", lambda: probe_driver(nvml_lib), DriverFacts())
    return env


def probe_driver(lib: Any | None = None) -> DriverFacts:
    """NVML's view: the driver, the highest CUDA it supports, each device, and the MIG instances of MIG devices."""
    with open_nvml(lib) as session:
        facts = read_driver(session)
        for device in facts.devices:
            device.source = "nvml"
            if device.mig_mode:
                device.mig_uuids = _mig_uuids(session, device)
    return facts


def _mig_uuids(session: NvmlSession, device: GpuDevice) -> list[str]:
    handle = session.query("nvmlDeviceGetHandleByIndex", device.index)
    count = session.query("nvmlDeviceGetMaxMigDeviceCount", handle)
    if isinstance(handle, Unavailable) or isinstance(count, Unavailable):
        return []
    uuids = []
    for slot in range(int(count)):
        mig = session.query("nvmlDeviceGetMigDeviceHandleByIndex", handle, slot)
        if isinstance(mig, Unavailable):
            continue  # an empty slot: NVML answers NOT_FOUND
        uuid = session.query("nvmlDeviceGetUUID", mig)
        if not isinstance(uuid, Unavailable):
            uuids.append(uuid.decode() if isinstance(uuid, bytes) else str(uuid))
    return uuids


def probe_torch(in_process: bool, timeout_s: float = DEFAULT_TIMEOUT_S, expect_device: str | None = None) -> TorchFacts:
    """torch's own answers, in this process or in a child interpreter with a time limit."""
    if importlib.util.find_spec("torch") is None:
        return TorchFacts(installed=False, import_error="No module named 'torch'", probe_mode="none")
    if in_process:
        return _in_process_facts(torch_probe.collect(init_cuda=False))
    init_cuda = expect_device is None or expect_device.split(":")[0] == "cuda"
    return _probe_torch_child(timeout_s, init_cuda)


def _in_process_facts(raw: dict[str, Any]) -> TorchFacts:
    facts = torch_facts_from(raw)
    facts.probe_mode = "in-process"
    return facts


# The child runs torch_probe.py by its path, with the working directory taken off sys.path (`python -c` puts it
# first): a ./torch.py or ./json.py where the user stands must not be what the probe imports, or runs.
_CHILD_BOOT = (
    "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
    "import runpy; runpy.run_path(sys.argv.pop(1), run_name='__main__')"
)


def _probe_torch_child(timeout_s: float, init_cuda: bool) -> TorchFacts:
    argv = [sys.executable, "-c", _CHILD_BOOT, torch_probe.__file__, *(["--init-cuda"] if init_cuda else [])]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return TorchFacts(
            installed=True,
            probe_mode="subprocess",
            init_warning=f"importing torch and initialising CUDA did not finish within {timeout_s:.0f} s (hung)",
        )
    line = next((ln for ln in reversed(done.stdout.splitlines()) if ln.startswith(torch_probe.MARKER)), None)
    stderr_tail = "\n".join(done.stderr.strip().splitlines()[-_STDERR_TAIL_LINES:])
    if line is None:
        # The child died before reporting: a segfault in a CUDA library, an abort in a C++ extension.
        return TorchFacts(
            installed=False,
            probe_mode="subprocess",
            import_error=f"`import torch` killed the interpreter (exit code {done.returncode}): {stderr_tail}"[:2000],
        )
    facts = torch_facts_from(json.loads(line[len(torch_probe.MARKER) :]))
    facts.probe_mode = "subprocess"
    cuda_lines = [ln for ln in stderr_tail.splitlines() if "cuda" in ln.lower()]
    if cuda_lines and not facts.init_warning:
        facts.init_warning = "\n".join(cuda_lines)  # old torch prints THCudaCheck failures to stderr, not as warnings
    facts.init_error_code = cuda_error_code(facts.init_warning or "")
    return facts


def torch_facts_from(raw: dict[str, Any]) -> TorchFacts:
    facts = TorchFacts(
        installed=raw.get("installed"),
        version=raw.get("version"),
        cuda_version=raw.get("cuda_version"),
        hip_version=raw.get("hip_version"),
        is_cpu_build=raw.get("is_cpu_build"),
        is_available=raw.get("is_available"),
        device_count=raw.get("device_count"),
        arch_list=raw.get("arch_list"),
        init_warning=raw.get("init_warning"),
        import_error=raw.get("import_error"),
        other_accelerators=dict(raw.get("other_accelerators") or {}),
        mps_built=raw.get("mps_built"),
    )
    facts.init_error_code = cuda_error_code(facts.init_warning or "")
    return facts


def _add_install_facts(facts: TorchFacts) -> None:
    """pip / conda / uv / source, from the installed distribution's metadata; conda's `cpuonly` pin."""
    try:
        dist = importlib.metadata.distribution("torch")
    except importlib.metadata.PackageNotFoundError:
        return
    facts.version = facts.version or dist.version
    installer = (dist.read_text("INSTALLER") or "").strip().lower()
    direct_url = json.loads(dist.read_text("direct_url.json") or "{}")
    conda_meta = Path(sys.prefix) / "conda-meta"
    if direct_url.get("dir_info", {}).get("editable"):
        facts.install_method = "source"
    elif any(conda_meta.glob("pytorch-[0-9]*.json")) or installer == "conda":
        facts.install_method = "conda"
    else:
        facts.install_method = installer or "unknown"
    if conda_meta.is_dir():
        facts.cpuonly_package = any(conda_meta.glob("cpuonly-*.json"))


def _unknown_facts(env: Environment) -> list[str]:
    unknown = []
    if env.host.pci_nvidia_devices is None:
        unknown.append("could not read the PCI bus (/sys/bus/pci), so an NVIDIA board without a driver may be missed")
    if env.torch.installed and env.torch.is_available is None:
        unknown.append("could not tell whether torch can use CUDA (the torch probe did not answer)")
    return unknown


def _guard(env: Environment, what: str, fn: Any, default: Any) -> Any:
    """Run one probe part; a failure becomes a sentence in `env.unknown`, never an exception."""
    try:
        return fn()
    except Exception as exc:  # the probe's promise is "never raises": the diagnosis must still come out
        env.unknown.append(f"could not probe {what}: {type(exc).__name__}: {exc}")
        return default
