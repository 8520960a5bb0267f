"""`python -m torch.utils.collect_env` (old and new formats, cut short, full-width colons) and its library lists.

Also detectron2's collect_env ("PyTorch 1.3.1", "CUDA available True", "GPU 0,1 GeForce RTX 2080 Ti").
"""

from __future__ import annotations

import re

from gputriage.collectors.env_text.facts import accelerator_answer, add_device, fail_wins, first, other_gpu
from gputriage.collectors.env_text.limits import MATCH_CHARS, small_int, version
from gputriage.collectors.env_text.lines import Line, Paste
from gputriage.collectors.env_text.packages import record_package
from gputriage.collectors.env_text.system import os_from
from gputriage.record.environment import Environment, GpuDevice

_KEY = re.compile(r"^[ \t]*([A-Za-z][A-Za-z _/()-]{1,45}?)[ \t]*[:：][ \t]*(.*)$")
_NO_COLON = re.compile(r"^(PyTorch version|CUDA used to build PyTorch|Is CUDA available)[ \t]+(\S.*)$", re.IGNORECASE)
_GPU_LINE = re.compile(
    r"^[ \t]*(?:GPU models and configuration:[ \t]*)?GPU ([0-9]{1,3})[ \t]*[:：][ \t]*(.+?)"
    r"(?:[ \t]*\(UUID: ([\w-]{4,64})\))?[ \t]*$"
)
_D2_GPU = re.compile(r"^GPU ([0-9,]{1,40})[ \t]+(\S.*?)(?:[ \t]*\(arch=([0-9]{1,2}\.[0-9]{1,2})\))?$")
_D2_AVAILABLE = ("cuda available ", "gpu available ")
# torch.__config__.show() ("PyTorch built with:", which detectron2's collect_env prints too): one "  - " item a line.
_RUNTIME = re.compile(r"^-[ \t]*(CUDA|HIP) Runtime[ \t]+([0-9][\w.]{0,20})")
_NVCC_ARCH = re.compile(r"code=((?:sm|compute)_[0-9]{2,3}a?)")
_SETTING = re.compile(r"\b(CUDA_VERSION|TORCH_VERSION)=([0-9][\w.+]{0,30})")
_LIB = re.compile(r"^\[(pip3?|conda)\][ \t]+([\w.-]{1,60})(?:[ \t]*==[ \t]*|[ \t]+)(\S{1,60})(?:[ \t]+(\S{1,80}))?")
_INTEL_GPU_ITEM = re.compile(r"^[ \t]*\*[ \t]+(Intel\S*[ \t][^\n]{2,80}?)[ \t]*$")
NOT_COLLECTED = ("could not collect", "n/a", "none", "no cuda", "")
_YES = ("true", "yes")
_NO = ("false", "no")


def collected(value: str | None) -> str | None:
    """A collect_env value, or None when collect_env could not collect it."""
    if value is None or value.strip().lower() in NOT_COLLECTED:
        return None
    return value.strip()


def extract(paste: Paste, env: Environment) -> None:
    fields: dict[str, str] = {}
    for line in paste.facts():
        match = _KEY.match(line.text) or _NO_COLON.match(line.text)
        if match:
            fields.setdefault(match.group(1).strip().lower(), match.group(2).strip())
    _apply(fields, env)  # collect_env's own fields first: its library lists may name other versions
    for line in paste.facts():
        _library(line, env)
        _detectron_lines(line, env)
    _gpus(paste, fields, env)
    _built_with(paste, env)


def _built_with(paste: Paste, env: Environment) -> None:
    """torch.__config__.show(): "- CUDA Runtime 11.1", "- NVCC architecture flags: ...code=sm_86...", "- Build
    settings: ..., CUDA_VERSION=11.1, ...". A whole block with a build-settings line and no CUDA or HIP in it is a
    build without CUDA."""
    heads = paste.containing("pytorch built with")
    start = next((line for line in heads if line.low.strip() == "pytorch built with:"), None)
    if start is None:
        return
    t = env.torch
    gpu_runtime = settings = False
    for line in paste.lines[start.index + 1 : start.index + 60]:
        text = line.text.strip()
        if not text.startswith("-"):
            break
        if runtime := _RUNTIME.match(text):
            gpu_runtime = True
            first(t, "cuda_version" if runtime.group(1) == "CUDA" else "hip_version", version(runtime.group(2)))
        elif text.lower().startswith("- nvcc architecture flags") and len(line.text) < MATCH_CHARS:  # never a cut list
            archs = list(dict.fromkeys(_NVCC_ARCH.findall(text)))
            first(t, "arch_list", archs[:40] or None)
        elif text.lower().startswith("- build settings:"):
            settings = True
            found = dict(_SETTING.findall(text))
            gpu_runtime = gpu_runtime or "CUDA_VERSION" in found or "rocm" in line.low or "hip" in line.low
            first(t, "cuda_version", version(found.get("CUDA_VERSION", "")))
            first(t, "version", version(found.get("TORCH_VERSION", "")))
    if settings and not gpu_runtime and t.cuda_version is None and t.hip_version is None:
        first(t, "cpu_build_evidence", "torch.__config__.show(): built with no CUDA runtime and no CUDA_VERSION")


def _apply(fields: dict[str, str], env: Environment) -> None:
    t, h, d = env.torch, env.host, env.driver
    torch_version = version(collected(fields.get("pytorch version")) or "")
    if torch_version:
        first(t, "version", torch_version)
        fail_wins(t, "installed", True)
    built = fields.get("cuda used to build pytorch")
    if built is not None:
        first(t, "cuda_version", version(collected(built) or ""))
        rocm = collected(fields.get("rocm used to build pytorch"))
        if collected(built) is None and rocm is None and torch_version and t.cpu_build_evidence is None:
            t.cpu_build_evidence = "collect_env: CUDA used to build PyTorch: Could not collect"
    first(t, "hip_version", version(collected(fields.get("rocm used to build pytorch")) or ""))
    available = fields.get("is cuda available", "").lower()
    if available in _YES + _NO:
        fail_wins(t, "is_available", available in _YES)
    xpu = fields.get("is xpu available", "").lower()  # collect_env of torch 2.5 and later, on every machine
    if xpu in _YES + _NO:
        accelerator_answer(env, "xpu", xpu in _YES)
    first(h, "cuda_toolkit_version", version(collected(fields.get("cuda runtime version")) or ""))
    first(d, "driver_version", version(collected(fields.get("nvidia driver version")) or ""))
    python = collected(fields.get("python version"))
    first(h, "python_version", version(python or ""))
    first(h, "platform", collected(fields.get("python platform")))
    os_line = (collected(fields.get("os")) or "") + " " + (h.platform or "")
    first(h, "os_name", os_from(os_line))


def _gpus(paste: Paste, fields: dict[str, str], env: Environment) -> None:
    inline = collected(fields.get("gpu models and configuration"))
    for line in paste.containing("gpu "):
        match = _GPU_LINE.match(line.text)
        if match and (index := small_int(match.group(1), 999)) is not None:
            add_device(env, GpuDevice(index=index, name=match.group(2), uuid=match.group(3), source="collect_env"))
    if inline and not env.driver.devices and not inline.lower().startswith("gpu "):
        add_device(env, GpuDevice(index=0, name=inline, source="collect_env"))
    for line in paste.containing("intel gpu models"):  # "Intel GPU models onboard:" then "* Intel(R) Arc(TM) ..."
        for item in paste.lines[line.index + 1 : line.index + 3]:
            if (named := _INTEL_GPU_ITEM.match(item.text)) is not None:
                other_gpu(env, named.group(1))


def _library(line: Line, env: Environment) -> None:
    """ "[pip3] torch==2.0.1+cu117", "[conda] pytorch 1.11.0 py3.8_cpu_0 pytorch", "[conda] cpuonly 2.0 0"."""
    match = _LIB.match(line.text)
    if not match:
        return
    manager, name, pkg_version, build = match.groups()
    manager = "conda" if manager == "conda" else "pip"
    record_package(env, name.lower(), pkg_version, build=build, manager=manager, text=line.text)


def _detectron_lines(line: Line, env: Environment) -> None:
    """detectron2's collect_env: "PyTorch 1.3.1", "CUDA available True" (later "GPU available Yes"), "GPU 0,1,2
    GeForce RTX 2080 Ti" (later with "(arch=7.5)"), "Driver version 496.49"."""
    text = line.text.strip()
    if text.startswith("PyTorch ") and (v := version(text[8:])):
        first(env.torch, "version", v)
    elif text.lower().startswith(_D2_AVAILABLE) and text[14:].strip().lower() in _YES + _NO:
        fail_wins(env.torch, "is_available", text[14:].strip().lower() in _YES)
    elif text.lower().startswith("driver version ") and (v := version(text[15:])):
        first(env.driver, "driver_version", v)
    elif match := _D2_GPU.match(text):
        for part in match.group(1).split(",")[:64]:
            if (index := small_int(part, 999)) is not None:
                device = GpuDevice(index=index, name=match.group(2), compute_capability=match.group(3))
                device.source = "collect_env"
                add_device(env, device)
