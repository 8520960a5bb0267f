"""How extractors record what they read: the first fact of each kind wins, and every value is bounded first.

Reports quote the failing machine first and follow-ups later, and the extractors run from the most reliable kind of
text (collect_env, nvidia-smi, printed answers) to the least (install commands, prose), so "first wins" is also
"most reliable wins". The few facts where the failing state must win over a working one (torch not importable, CUDA
not available) are set by the extractors with `fail_wins`.
"""

from __future__ import annotations

import re
from typing import Any

from gputriage.collectors.env_text.limits import MAX_ITEMS, cap
from gputriage.record.environment import Environment, GpuDevice

_MARKS = re.compile(r"\((?:R|TM)\)")
_NON_NVIDIA = ("amd ", "radeon", "intel", "apple", "mesa", "gfx")


def first(obj: Any, name: str, value: Any) -> None:
    """Set `obj.name` to `value` unless it is already known (or `value` is None)."""
    if value is None:
        return
    if isinstance(value, str):
        value = cap(value)
        if not value:
            return
    if getattr(obj, name) is None:
        setattr(obj, name, value)


def fail_wins(obj: Any, name: str, value: bool | None) -> None:
    """A boolean where False (the failing state) overrides True: the report is about the failure."""
    if value is None:
        return
    current = getattr(obj, name)
    if current is None or (current is True and value is False):
        setattr(obj, name, value)


def accelerator_answer(env: Environment, kind: str, value: bool | None) -> None:
    """torch's answer for another accelerator (`torch.xpu.is_available()`, MPS): a failure seen anywhere wins."""
    accelerators = env.torch.other_accelerators
    if value is not None and (not value or accelerators.get(kind) is not False):
        accelerators[kind] = value


def other_gpu(env: Environment, name: str) -> None:
    """A GPU of another vendor (Intel, AMD) named in the report, once, without its trademark marks ("Intel(R)
    Arc(TM) A770" is "Intel Arc A770")."""
    name = cap(_MARKS.sub("", name).strip())
    if name and name not in env.host.other_gpus and len(env.host.other_gpus) < MAX_ITEMS:
        env.host.other_gpus.append(name)


def add_device(env: Environment, device: GpuDevice) -> None:
    """Add a GPU unless one with the same index (or bus id) is listed; fill what the listed one lacks."""
    devices = env.driver.devices
    for known in devices:
        same_bus = device.pci_bus_id and known.pci_bus_id and device.pci_bus_id.endswith(known.pci_bus_id[-7:])
        if known.index == device.index or same_bus:
            for name in ("uuid", "compute_capability", "pci_bus_id", "memory_total_bytes", "compute_mode", "error"):
                first(known, name, getattr(device, name))
            if known.name.endswith("...") and not device.name.endswith("..."):
                known.name = device.name
            return
    if len(devices) < MAX_ITEMS:
        device.name = cap(device.name)
        devices.append(device)


def is_nvidia_name(name: str) -> bool:
    low = name.lower()
    return not any(word in low for word in _NON_NVIDIA)
