"""Which device a run is judged for: one answer, asked by every rule and renderer.

The user says it with `--expect-device` (or `expect_device=` in the API). Without it, the job is meant for the first
accelerator torch reaches; when torch reaches none but the machine has an NVIDIA GPU (a CPU-only wheel, a broken
driver), it is still meant for that GPU, so rung 1 explains why torch cannot use it; with no GPU at all, it is a CPU
run. `gputriage run` resolves this at the job's start (it needs the answer before the probes judge placement) and
stores it in the record; `gputriage env` and a pasted text derive it from the environment facts with the same rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gputriage.record.environment import Environment
    from gputriage.record.run import Run

# The order people mean by "the GPU": NVIDIA/AMD first, then the other accelerators torch knows.
ACCELERATOR_ORDER = ("cuda", "xpu", "mps", "npu", "hpu", "mtia")
# Devices that are not an accelerator: the NVIDIA-specific checks are only info for them.
NOT_ACCELERATORS = frozenset({"cpu", "meta"})
_NVIDIA_NODE_RE = re.compile(r"^/dev/nvidia\d+$")


def device_type(name: str | None) -> str | None:
    """ "cuda" for "cuda:1" / "CUDA"; None for None or an empty name."""
    if not name:
        return None
    return name.split(":", 1)[0].strip().lower() or None


def default_device(
    cuda_available: bool | None,
    other_accelerators: Mapping[str, bool],
    nvidia_gpu_seen: bool,
    gpu_report: bool = False,
) -> str:
    """The device a job means when the user did not say.

    Args:
        cuda_available: torch.cuda.is_available() (None: not known).
        other_accelerators: xpu / mps / ... -> available.
        nvidia_gpu_seen: NVML, a /dev/nvidia* node or the PCI bus shows an NVIDIA GPU.
        gpu_report: the facts come from a pasted report: people paste one because a GPU is not used.
    """
    if cuda_available:
        return "cuda"
    for kind in ACCELERATOR_ORDER[1:]:
        if other_accelerators.get(kind):
            return kind
    if nvidia_gpu_seen or gpu_report:
        return "cuda"
    return "cpu"


def default_device_from_facts(env: Environment) -> str:
    nvidia_seen = bool(
        env.driver.devices
        or any(
            node.startswith("/dev/nvidia") and node[len("/dev/nvidia") :].isdigit() for node in env.host.dev_nodes or []
        )
        or (env.host.pci_nvidia_devices or 0) > 0
        or env.host.proc_driver_version
    )
    mac_asks_mps = env.host.os_name == "darwin" and ("mps" in env.torch.other_accelerators or bool(env.torch.mps_named))
    if env.source == "text" and mac_asks_mps and not nvidia_seen:
        return "mps"  # a Mac's report that asks about MPS (or shows its error) is about Apple's GPU
    if env.source == "text" and not nvidia_seen and not env.torch.is_available and _asks_xpu(env):
        return "xpu"  # a report that asks torch.xpu (or runs its XPU build) is about the Intel GPU
    if env.source == "text" and nvidia_seen and not env.torch.is_available:
        # an NVIDIA GPU that torch does not reach is what a pasted report is about, whatever else answers: an XPU
        # wheel on a laptop with Intel graphics beside its RTX answers "Is XPU available: True" (a re-judge)
        return "cuda"
    return default_device(env.torch.is_available, env.torch.other_accelerators, nvidia_seen, env.source == "text")


def _asks_xpu(env: Environment) -> bool:
    return "xpu" in env.torch.other_accelerators or "+xpu" in (env.torch.version or "")


def judged_device(run: Run) -> str | None:
    """The device type this run is judged for: cuda | xpu | mps | ... | meta | cpu; None when nothing tells (a trace
    read on its own)."""
    given = device_type(run.expect_device)
    if given is not None:
        return given
    if run.resolved_device is not None:
        return run.resolved_device
    if run.environment is not None:
        return default_device_from_facts(run.environment)
    return None


def on_stand_in(run: Run) -> bool:
    """The job ran on a stand-in device (a preflight, or the meta stand-in): its times are the host's, and a host sync
    waits for no device."""
    return run.stand_in is not None or judged_device(run) == "meta"


def is_preflight(run: Run) -> bool:
    """The job ran under `run --preflight` (not the meta stand-in of `--expect-device meta`)."""
    return run.stand_in is not None and run.stand_in.preflight


def judged_for_nvidia(run: Run) -> bool:
    """NVIDIA-specific findings matter (critical, not info): the run is judged for cuda, or nothing says otherwise."""
    return judged_device(run) in (None, "cuda")
