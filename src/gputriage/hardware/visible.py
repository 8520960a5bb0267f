"""Which NVML devices a CUDA process sees, and under which CUDA index, given CUDA_VISIBLE_DEVICES.

CUDA's rules, as the CUDA C Programming Guide and the MIG user guide give them:
- unset: every GPU; a GPU in MIG mode shows as its first MIG instance (one MIG device per process).
- empty or "-1": none.
- a comma-separated list of indices, full or abbreviated GPU UUIDs ("GPU-8a7f", unique prefixes are enough), or MIG
  UUIDs ("MIG-<uuid>", or the R450 form "MIG-GPU-<uuid>/<gi>/<ci>"). Parsing stops at the first entry that names
  no device (or one already listed): that entry and all after it are ignored.
- indices count in CUDA's order, which is NVML's (PCI bus) order when CUDA_DEVICE_ORDER=PCI_BUS_ID; with the default
  FASTEST_FIRST they agree when the GPUs are all of one model, which is the usual case.
"""

from __future__ import annotations

import msgspec


class NvmlIdentity(msgspec.Struct, frozen=True):
    """What the mapping needs to know of one NVML device."""

    index: int
    uuid: str | None
    name: str | None = None
    mig_uuids: tuple[str, ...] = ()


class VisibleDevice(msgspec.Struct, frozen=True):
    cuda_index: int
    nvml_index: int
    mig_uuid: str | None = None


class Visibility(msgspec.Struct):
    devices: list[VisibleDevice] = msgspec.field(default_factory=list)
    # Entries CUDA ignores, with why: ["7 (no such GPU)", "GPU-dead (matches no GPU)"].
    ignored: list[str] = msgspec.field(default_factory=list)
    note: str | None = None  # a caveat on the mapping (order), when one applies

    def for_nvml(self, nvml_index: int) -> VisibleDevice | None:
        return next((d for d in self.devices if d.nvml_index == nvml_index), None)


def map_visible(value: str | None, gpus: list[NvmlIdentity], device_order: str | None = None) -> Visibility:
    """Apply CUDA_VISIBLE_DEVICES (`value`, None when unset) to the NVML devices."""
    vis = Visibility()
    if value is None:
        for cuda_index, gpu in enumerate(gpus):
            vis.devices.append(VisibleDevice(cuda_index, gpu.index, gpu.mig_uuids[0] if gpu.mig_uuids else None))
    else:
        _apply_list(value, gpus, vis)
    names = {g.name for g in gpus if g.name}
    if len(names) > 1 and (device_order or "FASTEST_FIRST") != "PCI_BUS_ID":
        vis.note = (
            "GPUs of different models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA numbers the fastest first, so "
            "CUDA indices may not follow NVML's; set CUDA_DEVICE_ORDER=PCI_BUS_ID to make them agree"
        )
    return vis


def _apply_list(value: str, gpus: list[NvmlIdentity], vis: Visibility) -> None:
    tokens = [t.strip() for t in value.split(",")]
    if tokens == [""]:
        return
    seen: set[tuple[int, str | None]] = set()
    for position, token in enumerate(tokens):
        match, why = _resolve(token, gpus)
        if match is not None and match in seen:
            match, why = None, "listed twice"
        if match is None:
            vis.ignored.extend(
                [f"{token or '(empty)'} ({why})"] + [f"{t} (after an ignored entry)" for t in tokens[position + 1 :]]
            )
            return
        seen.add(match)
        vis.devices.append(VisibleDevice(len(vis.devices), match[0], match[1]))


def _resolve(token: str, gpus: list[NvmlIdentity]) -> tuple[tuple[int, str | None] | None, str]:  # noqa: PLR0911  (one return per CUDA entry form)
    """(nvml index, MIG UUID or None) for one entry, or None with the reason CUDA ignores it."""
    digits = token.lstrip("-")
    if digits.isascii() and digits.isdigit():  # "²" is a digit to str.isdigit, not to CUDA
        # An index longer than any GPU count names no GPU; int() of 5,000 digits would raise.
        index = int(token) if len(digits) <= 9 else (-1 if token.startswith("-") else len(gpus))
        if 0 <= index < len(gpus):
            gpu = gpus[index]
            return (gpu.index, gpu.mig_uuids[0] if gpu.mig_uuids else None), ""
        return None, "no such GPU" if index >= 0 else "hides every GPU"
    if token.startswith("MIG-GPU-"):
        # R450 form MIG-GPU-<uuid>/<gi>/<ci>: the instance is named by its parent's UUID and instance ids.
        parent = token[len("MIG-") :].split("/", maxsplit=1)[0]
        found = _by_prefix(parent, gpus)
        if found is None:
            return None, "matches no GPU"
        return (found.index, found.mig_uuids[0] if found.mig_uuids else None), ""
    if token.startswith("MIG-"):
        hits = [(g.index, m) for g in gpus for m in g.mig_uuids if m.startswith(token)]
        if len(hits) == 1:
            return hits[0], ""
        return None, "matches no MIG instance" if not hits else "matches several MIG instances"
    found = _by_prefix(token if token.startswith("GPU-") else f"GPU-{token}", gpus)
    if found is None:
        return None, "matches no GPU, or several"
    return (found.index, None), ""


def _by_prefix(prefix: str, gpus: list[NvmlIdentity]) -> NvmlIdentity | None:
    hits = [g for g in gpus if g.uuid and g.uuid.startswith(prefix)]
    return hits[0] if len(hits) == 1 else None
