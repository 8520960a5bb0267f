"""`nvidia-smi` in every form: the table (Linux, Windows TCC/WDDM, WSL, cut short), `-L`, `-q`, `--query-gpu` CSV,
a bare "Driver Version: 460.80" line, and its failures (no driver, NVML mismatch, no devices, not installed, lost GPU).
"""

from __future__ import annotations

import re

from gputriage.collectors.env_text.facts import add_device, first
from gputriage.collectors.env_text.limits import small_int, version
from gputriage.collectors.env_text.lines import Line, Paste
from gputriage.record.environment import Environment, GpuDevice

_HEADER = re.compile(r"Driver Version:[ \t]*([0-9][0-9.]{2,20})(?:[ \t|]+CUDA Version:[ \t]*([0-9]{1,2}\.[0-9]{1,2}))?")
_CUDA = re.compile(r"CUDA Version:[ \t]*([0-9]{1,2}\.[0-9]{1,2})")
# "Running `nvidia-smi` ... it had `CUDA Version 11.4` listed": nvidia-smi's header quoted in prose
_PROSE_CUDA = re.compile(r"cuda version[`'\" \t:]{1,4}([0-9]{1,2}\.[0-9]{1,2})\b")
_BUS = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9]")
_PERSISTENCE = ("On", "Off", "WDDM", "TCC")
_MODE = re.compile(r"\|[ \t]+[0-9]{1,3}%[ \t]+(Default|E\. Process|E\. Thread|Prohibited)[ \t]*\|")
_MIG_MODE = re.compile(r"\|[ \t]+(Enabled|Disabled)[ \t]*\|[ \t]*$")
_LIST = re.compile(r"^GPU ([0-9]{1,3}): (.{1,80}?) \(UUID: (GPU-[0-9A-Fa-f-]{8,40})\)")
_MIG = re.compile(r"^[ \t]+MIG [\w.]{1,20}[ \t]+Device[ \t]+[0-9]{1,3}: \(UUID: (MIG-[\w/-]{8,80})\)")
_QUERY = re.compile(r"^[ \t]*(Driver Version|CUDA Version|Product Name|Compute Mode)[ \t]*:[ \t]*(\S.{0,80})$")
_CSV_FIELDS = re.compile(r"--query-gpu=([\w.,\[\] -]{1,200}?)(?:[ \t]|$)")
_NVML_FAILED = re.compile(r"Failed to initialize NVML:[ \t]*([^`。，；\n]{1,120})")  # to the end of a quoted error
_NOT_FOUND = re.compile(
    r"nvidia-smi(?:\.exe)?: (?:command )?not found|'nvidia-smi(?:\.exe)?' is not recognized|"
    r"nvidia-smi(?:\.exe)?\W{0,3} is not recognized|nvidia-smi: no such file|"
    r"nvidia-smi\W{0,3}(?:\w+\W{1,3}){0,3}(?:command not found|not found)",
    re.IGNORECASE,
)
_LOST = re.compile(r"Unable to determine the device handle for GPU[ \t]*([0-9A-Fa-f:.]{4,20}):[ \t]*(.{1,100})")
_MODES = {"E. Process": "Exclusive_Process", "E. Thread": "Exclusive_Thread"}


def extract(paste: Paste, env: Environment) -> None:
    _table(paste, env)
    _list_and_query(paste, env)
    _csv(paste, env)
    _failures(paste, env)


def _prose_driver_cuda(low: str) -> str | None:
    """The driver's CUDA quoted from nvidia-smi's header in a sentence that names nvidia-smi."""
    return _first(_PROSE_CUDA, low) if "nvidia-smi" in low else None


def _table(paste: Paste, env: Environment) -> None:
    d = env.driver
    last_row: GpuDevice | None = None
    block_row: GpuDevice | None = None
    for line in paste.containing("driver version", "cuda version", "|"):
        header = _HEADER.search(line.text)
        if header:
            first(d, "driver_version", version(header.group(1)))
            first(d, "cuda_driver_version", header.group(2) or _first(_CUDA, line.text))
            d.nvml_loaded = True if d.nvml_loaded is None else d.nvml_loaded
        elif "cuda version" in line.low and (cuda := _first(_CUDA, line.text) or _prose_driver_cuda(line.low)):
            first(d, "cuda_driver_version", cuda)
        row = _row(line.text)
        if row is not None:
            last_row = block_row = row
            add_device(env, last_row)
        elif last_row is not None and (mode := _MODE.search(line.text)):
            last_row.compute_mode = _MODES.get(mode.group(1), mode.group(1))
            last_row = None
        elif block_row is not None and (mig := _MIG_MODE.search(line.text)):
            # the block's third line, under the header's "MIG M.": the GPU's MIG mode
            block_row.mig_mode, block_row = mig.group(1) == "Enabled", None


def _row(text: str) -> GpuDevice | None:
    """ "|   0  NVIDIA GeForce RTX 4090        Off |   00000000:01:00.0  On |" by splitting, not backtracking."""
    if not text.startswith("|") or text.count("|") < 3:
        return None
    cells = text.split("|", 3)
    words = cells[1].split()
    if len(words) < 3 or words[-1] not in _PERSISTENCE:
        return None
    index = small_int(words[0], 999)
    bus = _BUS.match(cells[2].strip())
    if index is None or bus is None:
        return None
    return GpuDevice(index=index, name=" ".join(words[1:-1]), pci_bus_id=bus.group(0), source="nvidia-smi")


def _list_and_query(paste: Paste, env: Environment) -> None:
    last: GpuDevice | None = None
    for line in paste.containing("gpu ", "uuid", "version", "product name", "compute mode"):
        listed = _LIST.match(line.text)
        if listed and (index := small_int(listed.group(1), 999)) is not None:
            last = GpuDevice(index=index, name=listed.group(2), uuid=listed.group(3), source="nvidia-smi")
            add_device(env, last)
            continue
        mig = _MIG.match(line.text)
        if mig and last is not None and len(last.mig_uuids) < 64:
            last.mig_uuids.append(mig.group(1))
            last.mig_mode = True
            continue
        query = _QUERY.match(line.text)
        if query:
            _query_field(env, query.group(1), query.group(2).strip())


def _query_field(env: Environment, key: str, value: str) -> None:
    d = env.driver
    if key == "Driver Version":
        first(d, "driver_version", version(value))
    elif key == "CUDA Version":
        first(d, "cuda_driver_version", version(value))
    elif key == "Product Name":
        add_device(env, GpuDevice(index=len(d.devices), name=value, source="nvidia-smi"))
    elif key == "Compute Mode" and d.devices:
        first(d.devices[-1], "compute_mode", value)


def _csv(paste: Paste, env: Environment) -> None:
    """`nvidia-smi --query-gpu=name,driver_version,... --format=csv[,noheader]` and the rows after it."""
    fields: list[str] | None = None
    for line in paste.facts():
        command = _CSV_FIELDS.search(line.text)
        if command:
            fields = [f.strip().lower() for f in command.group(1).split(",")] if "noheader" in line.low else None
            continue
        cells = [c.strip() for c in line.text.split(",")]
        if len(cells) < 2:
            continue
        header = [c.lower().split(" [")[0] for c in cells]
        if "name" in header and ("driver_version" in header or "index" in header or "compute_cap" in header):
            fields = header
            continue
        if fields and len(cells) == len(fields):
            _csv_row(env, dict(zip(fields, cells, strict=True)))


def _csv_row(env: Environment, row: dict[str, str]) -> None:
    index = small_int(row.get("index", ""), 999)
    name = row.get("name") or row.get("gpu_name")
    if name:
        index = index if index is not None else len(env.driver.devices)
        cap = row.get("compute_cap")
        add_device(
            env,
            GpuDevice(
                index=index,
                name=name,
                uuid=row.get("uuid"),
                compute_capability=version(cap) if cap else None,
                compute_mode=row.get("compute_mode"),
                source="nvidia-smi",
            ),
        )
    first(env.driver, "driver_version", version(row.get("driver_version", "")))


def _failures(paste: Paste, env: Environment) -> None:
    d = env.driver
    for line in paste.facts():
        failed = _NVML_FAILED.search(line.text)
        if failed:
            d.nvml_loaded, d.nvml_error = False, failed.group(1).strip()
        if "nvml library version:" in line.low:
            first(d, "driver_version", version(line.text.split(":", 1)[1]))
        if "couldn't communicate with the nvidia driver" in line.low or "couldn‘t communicate" in line.low:
            d.nvml_loaded = False
            first(d, "nvml_error", "Driver Not Loaded (nvidia-smi couldn't communicate with the driver)")
        if line.low.strip() == "no devices were found":
            d.nvml_loaded, d.no_devices_reported = True, True
        if _NOT_FOUND.search(line.text):
            env.host.nvidia_smi_missing = True
        lost = _LOST.search(line.text)
        if lost:
            add_device(
                env,
                GpuDevice(
                    index=len(d.devices),
                    name=f"GPU {lost.group(1)}",
                    pci_bus_id=lost.group(1),
                    error=lost.group(2).strip(),
                    source="nvidia-smi",
                ),
            )


def _first(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    return match.group(1) if match else None


__all__ = ["Line", "extract"]
