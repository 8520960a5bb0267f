"""Errors and warnings: the catalogue's error texts (data/error_signatures.py), torch's CUDA-initialisation and
capability warnings, and the numbers some of them carry (the driver's CUDA in "too old (found version 11040)", the
CUDA a container needs, the error number of "Error 804", "error=35", "(46)").
"""

from __future__ import annotations

import re

from gputriage.collectors.env_text.facts import add_device, fail_wins, first
from gputriage.collectors.env_text.limits import MAX_ITEMS, cap, small_int, version
from gputriage.collectors.env_text.lines import Paste
from gputriage.data.cuda_tables import CUDA_ERROR_TEXTS
from gputriage.data.error_signatures import match_signatures, signature, signature_of_error
from gputriage.record.environment import Environment, ErrorSeen, GpuDevice

_ERROR_NUMBER = re.compile(
    r"\berror[ =:]{1,3}([0-9]{1,3})\b|\bcuda error ([0-9]{1,3})\b|\berror \(([0-9]{1,3})\)|\(([0-9]{1,3})\)[ \t]*:|"
    r"returned ([0-9]{1,3})\b|\(([0-9]{1,3}) vs\. 0\)|failure: ([0-9]{1,3})\b|error[ \t]+no?[ \t]*([0-9]{1,3})\b",
    re.IGNORECASE,
)
_FOUND_VERSION = re.compile(r"too old \(found version ([0-9]{4,6})\)")
_NEEDS_CUDA = re.compile(r"cuda>=([0-9]{1,2}\.[0-9])|driver ([0-9]{1,2}\.[0-9]) < image ([0-9]{1,2}\.[0-9])")
_BUILT_FOR = re.compile(r"built for NVIDIA Driver Release ([0-9.]{3,12}) or later, but\s+version ([0-9.]{3,12})")
_INIT = re.compile(r"CUDA initialization:[ \t]*(.{1,300}?)(?:[ \t]*\(Triggered internally.*)?$")
_CAPABILITY = re.compile(r"^[>\s*`'\"-]*(.{1,80}?) with CUDA capability sm_([0-9]{1,2})([0-9]) is not compatible")
# Where a GPU's product name starts, when the reporter's words run into it on the same line ("Heya, get this error
# NVIDIA GeForce RTX 5080 with CUDA capability sm_120 ...").
_PRODUCT_START = re.compile(
    r"\b(?:NVIDIA|GeForce|Tesla|Quadro|TITAN|Jetson|RTX|GTX|[AHLBTPV]\d{1,3}\b|GB\d{3}|GH\d{3})", re.IGNORECASE
)
_ARCHS = re.compile(r"supports CUDA capabilities((?:[ \t]+(?:sm|compute)_[0-9]{2,3}a?){1,40})")
_FOUND_GPU = re.compile(
    r"Found GPU([0-9]{1,3}) (.{1,80}?) which is of (?:cuda|compute) capability (?:\(CC\) )?([0-9]{1,2})\.([0-9])",
    re.IGNORECASE,
)
_MIN_CC = re.compile(
    r"minimum cuda capability (?:supported by this library|that we support) is ([0-9]{1,2}\.[0-9])", re.IGNORECASE
)
_LIGHTNING = re.compile(r"GPU available: (True|False)(?:, used: (True|False))?")
_NOT_AVAILABLE = re.compile(r"but CUDA is not available|CUDA is not available|cuda unavailable", re.IGNORECASE)
_ON_CUDA = re.compile(r"device='cuda(?::[0-9]{1,3})?'")
# The reporter says the job holds GPU memory while the GPU idles ("the gpu memory is indeed allocated", "GPU memory
# 用掉了", "显存占满了"): memory is only taken by a process that reached the GPU, so rung 1 is not the cause.
_MEMORY_HELD = re.compile(
    r"\b(?:gpu|cuda|vram|video)[ \t-]*memory\b[^.!?\n]{0,30}?\b(?:is|was|gets?|got|has been|being)?[ \t]*"
    r"(?:indeed[ \t]+|already[ \t]+|fully[ \t]+|all[ \t]+)?(?:allocated|occupied|used up|filled|taken|in use)\b|"
    r"(?:显存|GPU[ \t]*memory|gpu[ \t]*memory)[ \t]*(?:已经|已|也|都)?(?:被)?(?:用掉|占用|占满|用满|分配)",
    re.IGNORECASE,
)
# "with nvidia-smi during training the GPU is at 70% load": the driver's own tool saw the job's GPU busy, so torch
# reaches it (a Task Manager graph at 0% beside it shows the 3D engine, not CUDA's compute).
_SMI_BUSY = re.compile(
    r"\bnvidia-smi\b[^.!?\n]{0,80}?(?<![0-9.])(?:[1-9][0-9]?|100)[ \t]*%[^.!?\n]{0,20}?\b(?:load|util\w*|usage|busy)\b",
    re.IGNORECASE,
)
# ... and the sentence says it was the job's (the desktop or another process keeps a GPU busy too)
_DURING_THE_JOB = re.compile(r"\b(?:train\w*|during|while|running|the job|the script|the model)\b", re.IGNORECASE)
# A framework saying it runs on the CPU: whisper's FP16 warning, EasyOCR's note, and the common "no GPU ..., using CPU".
_CPU_FALLBACK = re.compile(
    r"FP16 is not supported on CPU; using FP32 instead|Using CPU\. Note: This module is much faster with a GPU|"
    r"\bno (?:cuda|gpu)s?\b[^.\n]{0,30}?\b(?:found|available|detected)\b[^.\n]{0,20}?"
    r"(?:using|falling back to|fall back to|running on)[ \t]+(?:the[ \t]+)?cpu\b",
    re.IGNORECASE,
)
# "It defaults to the [cpu] version", "pip installs the CPU version", "I only get the cpu-only build": the reporter
# says the torch they got is the CPU one.
_CPU_VERSION_SAID = re.compile(
    r"\b(?:defaults? to|defaulted to|installs?|installed|gets?|got|is|only)[ \t]+(?:the[ \t]+|a[ \t]+)?"
    r"\[?cpu\]?(?:[ \t-]?only)?[ \t]+(?:version|build|wheel)\b",
    re.IGNORECASE,
)
# The reporter's own reading of the GPU's load while the job runs ("GPU is working only %8-9", "GPU usage is 30%",
# "gpu utilization around 15 %"): above zero, something runs on it, so torch reached it; a low one is rung 5's.
_GPU_LOAD_SAID = re.compile(
    r"\bgpu(?:[ \t]+(?:usage|utili[sz]ation|util|load))?[ \t]+(?:is[ \t]+)?(?:working|running|used|at|only|just|around|"
    r"about|stays?|sits?|shows?|reaches|between|[ \t])*(?:%[ \t]?([0-9]{1,2})\b|\b([0-9]{1,2})[ \t]?%)",
    re.IGNORECASE,
)


def _gpu_load_said(text: str, env: Environment) -> None:
    if (load := _GPU_LOAD_SAID.search(text)) and int(load[1] or load[2]) > 0:
        first(env.torch, "gpu_use_evidence", f"the report says the GPU is in use while the job runs: {load[0]}")


_NO_TORCH = re.compile(r"No module named '?torch'?(?:$|[^._\w])")
# A CUDA error said by its number in prose: "CUDA Error 802 on H200 HF Jobs", "CUDA error: 100".
_CUDA_ERROR_SAID = re.compile(r"\bcuda[ _]error[ \t]*[:#]?[ \t]*([0-9]{1,3})\b(?![.])", re.IGNORECASE)
_OLD_UNKNOWN = re.compile(r"cuda runtime error \(30\)|error=30 : unknown error", re.IGNORECASE)


def cuda_error_code(text: str) -> int | None:
    """The CUDA error number a message names ("Error 804: ...", "error=35", "(46)"), or the one its words identify."""
    lowered = text.lower()
    for fragment, code in CUDA_ERROR_TEXTS.items():
        if fragment in lowered:
            number = _number(text)
            return number if number is not None and number != 30 else code
    number = _number(text)
    if number is not None:
        return 999 if number == 30 else number  # 30 was cudaErrorUnknown before CUDA 10.1
    return None


def _number(text: str) -> int | None:
    match = _ERROR_NUMBER.search(text)
    if not match:
        return None
    return small_int(next(g for g in match.groups() if g is not None), 999)


def extract(paste: Paste, env: Environment) -> None:
    for line in paste.facts():
        low = line.low
        _signatures(line.text, low, env)
        for seen in env.errors:  # the error again below its traceback (the title quoted it first): whose it is
            sig = signature(seen.key) if seen.package is None else None
            if sig is not None and any(f in low for f in sig.fragments):
                seen.package = _raising_package(paste, line.index)
        if "cuda initialization" in low:
            _init_warning(line.text, env)
        if "found version" in low or "cuda>=" in low or "image" in low or "built for" in low:
            _numbers(line.text, env)
        if "available" in low or "cuda" in low or "module named" in low:
            _availability(line.text, env)
        if ("memory" in low or "显存" in low) and (held := _MEMORY_HELD.search(line.text)):
            first(env.torch, "gpu_use_evidence", f"the report says the job holds GPU memory: {held.group(0)}")
        if "cpu" in low and (fallback := _CPU_FALLBACK.search(line.text)):
            first(env.torch, "cpu_fallback_evidence", fallback.group(0))
        if "nvidia-smi" in low and (busy := _SMI_BUSY.search(line.text)) and _DURING_THE_JOB.search(line.text):
            first(env.torch, "gpu_use_evidence", f"nvidia-smi showed the GPU busy during the job: {busy.group(0)}")
        if "gpu" in low and "%" in low and _DURING_THE_JOB.search(line.text):
            _gpu_load_said(line.text, env)
    for line in paste.lines:  # said anywhere, in a sentence that also tries something ("when trying uvx, it ...")
        if "cpu" in line.low and (said := _CPU_VERSION_SAID.search(line.text)):
            first(env.torch, "cpu_version_said", said.group(0))
            break
    apply_torch_warnings("\n".join(line.text for line in paste.facts() if _capability_words(line.low)), env)


# Where an error quoted in prose begins and ends: a sentence's end, a code span's backtick, CJK punctuation, a dash.
_CLAUSE_END = re.compile(r"[.!?;][ \t]|[`。，；！？]|[ \t][—–][ \t]")
_SHORT_LINE_CHARS = 160


def _clause(text: str, low: str, fragments: tuple[str, ...]) -> str:
    """The error as quoted: a short line whole; in a long line of prose, the clause around the error's own words (the
    reporter's sentence around it is not the error's text)."""
    at = min((i for f in fragments if (i := low.find(f)) >= 0), default=-1)
    if len(text) <= _SHORT_LINE_CHARS or at < 0:
        return text
    ends_before = [m.end() for m in _CLAUSE_END.finditer(text, 0, at)]
    start = ends_before[-1] if ends_before else 0
    after = _CLAUSE_END.search(text, at + min(len(f) for f in fragments if f in low))
    end = after.start() if after else len(text)
    return text[start:end].strip()


# A traceback frame in an installed package: 'File ".../site-packages/cpm_kernels/library/cuda.py", line 216' and
# IPython's "/opt/conda/lib/python3.8/site-packages/cpm_kernels/library/cuda.py in checkCUStatus(error)"
_PACKAGE_FRAME = re.compile(r"[/\\](?:site|dist)-packages[/\\]([A-Za-z_][\w.-]{0,60})[/\\]")
# Packages whose frames are torch's own way to the error (the nearest frame in one of them is not the culprit)
_TORCH_OWN = frozenset({"torch", "torchvision", "torchaudio", "typing_extensions"})
_FRAME_LINES = 30


def _raising_package(paste: Paste, index: int) -> str | None:
    """The package of the last frame above the error line, within a traceback's reach, when it is not torch's."""
    for line in reversed(paste.window(max(0, index - _FRAME_LINES), min(index, _FRAME_LINES) + 1)):
        if "packages" in line.low and (m := _PACKAGE_FRAME.search(line.text)):
            name = m.group(1)
            return None if name in _TORCH_OWN else name
    return None


def _signatures(text: str, low: str, env: Environment) -> None:
    found = match_signatures(low)
    if not found and "unknown error" in low and _OLD_UNKNOWN.search(text):
        found = [s for s in (signature("cuda-999"),) if s is not None]
    if not found and "error" in low and (said := _CUDA_ERROR_SAID.search(text)):
        found = [s for s in (signature_of_error(int(said.group(1))),) if s is not None]
    for sig in found:
        if len(env.errors) >= MAX_ITEMS or any(e.key == sig.key for e in env.errors):
            continue
        number = sig.cuda_error if sig.cuda_error is not None else _number(text)
        env.errors.append(ErrorSeen(sig.key, sig.finding, cap(_clause(text, low, sig.fragments)), number))
        if sig.finding in ("cuda-init-failed", "driver-too-old", "no-device") and env.torch.init_warning is None:
            env.torch.init_warning = cap(text)
            env.torch.init_error_code = cuda_error_code(text) if sig.cuda_error is None else sig.cuda_error
        if sig.finding is None:  # an error on the GPU proves torch reached it
            first(env.torch, "gpu_use_evidence", text)
        if sig.key == "not-compiled-with-cuda":
            first(env.torch, "cpu_build_evidence", text)


def _init_warning(text: str, env: Environment) -> None:
    match = _INIT.search(text)
    if match and env.torch.init_warning is None:
        env.torch.init_warning = cap(f"CUDA initialization: {match.group(1).strip()}")
        env.torch.init_error_code = cuda_error_code(match.group(1))


def _numbers(text: str, env: Environment) -> None:
    found = _FOUND_VERSION.search(text)
    if found and (code := small_int(found.group(1))) is not None:
        # torch prints the driver's CUDA as major*1000 + minor*10: 11040 -> 11.4
        first(env.driver, "cuda_driver_version", f"{code // 1000}.{(code % 1000) // 10}")
    needs = _NEEDS_CUDA.search(text)
    if needs:
        first(env.driver, "cuda_driver_version", needs.group(2))
        first(env.torch, "cuda_version", needs.group(1) or needs.group(3))
        first(env.torch, "cuda_version_inferred_from", "the container image's CUDA requirement")
    built = _BUILT_FOR.search(text)
    if built:
        first(env.driver, "driver_version", version(built.group(2)))


def _availability(text: str, env: Environment) -> None:
    lightning = _LIGHTNING.search(text)
    if lightning:
        fail_wins(env.torch, "is_available", lightning.group(1) == "True")
    # "Torch is not able to use GPU": Stable Diffusion web UI's start-up check of is_available()
    elif (_NOT_AVAILABLE.search(text) and "device_type of 'cuda'" in text) or "Torch is not able to use GPU" in text:
        fail_wins(env.torch, "is_available", False)
    if _ON_CUDA.search(text):
        first(env.torch, "gpu_use_evidence", text)
    if _NO_TORCH.search(text):
        env.torch.installed, env.torch.import_error = False, "ModuleNotFoundError: No module named 'torch'"


def _capability_words(low: str) -> bool:
    return "capabilit" in low or "found gpu" in low or "minimum cuda" in low


def apply_torch_warnings(text: str, env: Environment) -> None:
    """Mark the GPUs that torch's own capability warnings call unsupported (also used by the probe)."""
    t = env.torch
    for full_line in text.splitlines()[:2000]:
        line = full_line[:400]
        if m := _CAPABILITY.match(line):
            _torch_device(env, name=_product_name(m.group(1)), capability=f"{m.group(2)}.{m.group(3)}")
        if (archs := _ARCHS.search(line)) and t.arch_list is None:
            t.arch_list = archs.group(1).split()
        for m in _FOUND_GPU.finditer(line):
            index = small_int(m.group(1), 999)
            _torch_device(env, name=_product_name(m.group(2)), capability=f"{m.group(3)}.{m.group(4)}", index=index)
        if (minimum := _MIN_CC.search(line)) and t.min_capability is None:
            t.min_capability = minimum.group(1)


def _torch_device(env: Environment, *, name: str, capability: str, index: int | None = None) -> None:
    """Record a device that torch's warning names as unsupported, merging it with one already listed by name."""
    for device in env.driver.devices:
        if device.name.endswith(name) or name.endswith(device.name) or _same_prefix(device.name, name):
            device.compute_capability, device.unsupported_by_torch = capability, True
            return
    add_device(
        env,
        GpuDevice(
            index=index if index is not None else len(env.driver.devices),
            name=name,
            compute_capability=capability,
            source="torch-warning",
            unsupported_by_torch=True,
        ),
    )


def _same_prefix(listed: str, named: str) -> bool:
    """nvidia-smi cuts long names ("NVIDIA GeForce ..."): the cut name must be a prefix of torch's full one."""
    return listed.endswith("...") and named.startswith(listed[:-3].rstrip())


def _product_name(raw: str) -> str:
    """The GPU's name from where its product name starts; the text as it is when no known token is in it."""
    text = raw.strip()
    start = _PRODUCT_START.search(text)
    return text[start.start() :] if start is not None else text
