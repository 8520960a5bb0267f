"""Event names, interned once and classified once: every later test on a name is a bit in a numpy array.

A trace repeats a few thousand distinct names millions of times. Each distinct name is read by the regular
expressions below when it is first seen; the analysis then masks whole columns with `bits[name_ids] & FLAG`.
What is kept is capped (limits.py): a hostile file with millions of distinct or huge names shares one
"<other names>" entry per class, so the classification stays exact while the text is dropped.
"""

from __future__ import annotations

import itertools
import operator
import re
import sys
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from gputriage.tracing.limits import MAX_NAME_CHARS, MAX_NAME_TEXT_CHARS, MAX_NAMES

# ---- classes of names (bits)
COMM = 1 << 0  # communication kernel: ^nccl.*Kernel (also ncclDevKernel_*), gloo (HTA's hta/utils/utils.py), DeepEP
MEMORY = 1 << 1  # ^Memcpy|^Memset|^dma (dma: MTIA)
MEMSET = 1 << 2
H2D = 1 << 3
D2H = 1 << 4
SRC_PAGEABLE = 1 << 5
SRC_PINNED = 1 << 6
DST_PAGEABLE = 1 << 7
TRITON = 1 << 8
STEP = 1 << 9  # ProfilerStep#N
DATALOADER = 1 << 10  # the DataLoader annotations the TensorBoard plugin counted as data loading
SYNC_CALL = 1 << 11  # cudaStreamSynchronize & co.
SYNC_OP = 1 << 12  # aten::item & co.
LAUNCH = 1 << 13  # a kernel-launch runtime call
GRAPH_LAUNCH = 1 << 14
ALLOC = 1 << 15
OPTIMIZER = 1 << 16
COMPILED = 1 << 17
CPU_COMPUTE = 1 << 18  # an ATen op that computes (not a view, copy, fill or allocation)
USER_FRAME = 1 << 19  # a python_function frame in the user's own code

# NCCL's and gloo's; and expert-parallel all-to-all kernels of DeepEP (`deep_ep::internode::dispatch`, DeepSeek's own
# `dpsk::ep::internode::combine`, `..._ll` for low latency), the whole communication of a MoE job (trial 11's
# 64-rank trace showed none)
_COMM_RE = re.compile(r"^nccl.*Kernel|gloo:|(?:deep_|\b)ep::(?:inter|intra)node(?:_ll)?::")
_MEMORY_RE = re.compile(r"^(Memcpy|Memset|dma)")
_COPY_RE = re.compile(r"^Memcpy (?P<dir>HtoD|DtoH|DtoD|PtoP|HtoH)(?: \((?P<src>\w+) -> (?P<dst>\w+)\))?")
DATALOADER_RE = re.compile(r"^enumerate\(DataLoader\)#.*__next__|^enumerate\(DataPipe\)#|DataLoader.*__next__")
_SYNC_CALL_RE = re.compile(r"^(cuda|hip)(StreamSynchronize|DeviceSynchronize|EventSynchronize|Memcpy)$")
_SYNC_OP_RE = re.compile(r"^aten::(item|_local_scalar_dense|nonzero|equal|is_nonzero)$")
_LAUNCH_RE = re.compile(r"(Launch|launch)")
_GRAPH_LAUNCH_RE = re.compile(r"^(cuda|hip)GraphLaunch")
_ALLOC_RE = re.compile(r"^(cuda|hip)(Malloc|Free|HostAlloc|MallocHost|FreeHost|HostRegister)")
_OPTIMIZER_RE = re.compile(r"^Optimizer\.(step|zero_grad)#")
_COMPILED_RE = re.compile(r"Torch-Compiled Region|CompiledFunction|CompiledFxGraph|torch_compile")
_STEP_RE = re.compile(r"^ProfilerStep#")
_NON_COMPUTE_OPS = re.compile(
    r"^aten::(to|_to_copy|copy_|empty|empty_strided|zeros|ones|item|_local_scalar_dense|pin_memory|_pin_memory|"
    r"record_stream|set_|resize_|detach|view|reshape|_reshape_alias|stack|cat|t|transpose|permute|expand|"
    r"as_strided|contiguous|slice|select|unsqueeze|squeeze|narrow|flatten|unbind|split|chunk|alias|numpy_T|"
    r"unfold|broadcast_to|lift_fresh|clone|fill_|zero_|random_|normal_|uniform_)$"
)

# A Python frame as torch.profiler(with_stack=True) names it: "train.py(42): train_step".
_FRAME_RE = re.compile(r"^(?P<file>[^()]+\.py)\((?P<line>\d{1,9})\): ")
_LIBRARY_MARKERS = ("site-packages", "dist-packages", "/torch/", "lib/python3", "<frozen", "/usr/lib/")
# Kineto names a frame by its path below the sys.path entry it came from ("torch/nn/modules/module.py(1743)",
# "transformers/models/..."), so a relative path whose first part is the standard library or a well-known ML
# package is library code; the user's script and packages keep their own names.
_LIBRARY_TOPS = frozenset(sys.stdlib_module_names) | {
    "torch", "torchvision", "torchaudio", "torchtext", "functorch", "triton", "transformers", "accelerate",
    "lightning", "pytorch_lightning", "lightning_fabric", "datasets", "tokenizers", "safetensors", "huggingface_hub",
    "peft", "diffusers", "timm", "einops", "deepspeed", "apex", "fairscale", "megatron", "xformers", "flash_attn",
    "numpy", "scipy", "pandas", "sklearn", "PIL", "cv2", "albumentations", "tqdm", "wandb", "tensorboard", "hydra",
    "omegaconf", "nvidia", "jax", "keras", "IPython", "ipykernel", "runpy", "gputriage",
}  # fmt: skip
# gputriage's own hooks run inside the user's steps under `run --trace`; their frames carry absolute paths.
_OWN_PACKAGE_DIR = str(Path(__file__).resolve().parents[1]) + "/"

OTHER_NAMES = "<other names>"


def user_frame(frame: str) -> str | None:
    """'train.py(42): step' -> 'train.py:42' when the frame is the user's code, not a library's."""
    match = _FRAME_RE.match(frame)
    if match is None:
        return None
    path = match["file"]
    if path.startswith(_OWN_PACKAGE_DIR) or any(marker in path for marker in _LIBRARY_MARKERS):
        return None
    if not path.startswith("/") and path.split("/", 1)[0].removesuffix(".py") in _LIBRARY_TOPS:
        return None
    return f"{path}:{int(match['line'])}"


def classify(name: str) -> int:
    """The class bits of one name (see the flags above)."""
    bits = 0
    if _COMM_RE.search(name):
        bits |= COMM
    elif _MEMORY_RE.match(name):
        bits |= MEMORY
    if name.startswith("Memset"):
        bits |= MEMSET
    copy = _COPY_RE.match(name)
    if copy is not None:
        bits |= {"HtoD": H2D, "DtoH": D2H}.get(copy["dir"], 0)
        bits |= {"Pageable": SRC_PAGEABLE, "Pinned": SRC_PINNED}.get(copy["src"] or "", 0)
        bits |= DST_PAGEABLE if copy["dst"] == "Pageable" else 0
    if "triton" in name:
        bits |= TRITON
    for flag, pattern in _SEARCHED:
        if pattern.search(name):
            bits |= flag
    if name.startswith("aten::") and not _NON_COMPUTE_OPS.match(name):
        bits |= CPU_COMPUTE
    if user_frame(name) is not None:
        bits |= USER_FRAME
    return bits


_SEARCHED = (
    (STEP, _STEP_RE),
    (DATALOADER, DATALOADER_RE),
    (SYNC_CALL, _SYNC_CALL_RE),
    (SYNC_OP, _SYNC_OP_RE),
    (LAUNCH, _LAUNCH_RE),
    (GRAPH_LAUNCH, _GRAPH_LAUNCH_RE),
    (ALLOC, _ALLOC_RE),
    (OPTIMIZER, _OPTIMIZER_RE),
    (COMPILED, _COMPILED_RE),
)


class NameTable(msgspec.Struct):
    """Interned names with their class bits; ids are dense ints in order of first appearance."""

    ids: dict[str, int] = msgspec.field(default_factory=dict)
    names: list[str] = msgspec.field(default_factory=list)
    bits: list[int] = msgspec.field(default_factory=list)
    _chars: int = 0
    _overflow: dict[int, int] = msgspec.field(default_factory=dict)  # class bits -> the shared "<other names>" id
    overflowed: int = 0  # distinct names that were not kept

    def intern(self, name: Any) -> int:
        # Names longer than the cap are kept (and classified) by their first MAX_NAME_CHARS characters: a 6 MiB
        # name costs one slice per event, never a regular expression over megabytes.
        key = (name if type(name) is str else _as_text(name))[:MAX_NAME_CHARS]
        found = self.ids.get(key)
        if found is not None:
            return found
        kept = key
        bits = classify(key)
        if len(self.names) >= MAX_NAMES or self._chars + len(kept) > MAX_NAME_TEXT_CHARS:
            self.overflowed += 1
            shared = self._overflow.get(bits)
            if shared is None:
                shared = self._overflow[bits] = self._add(OTHER_NAMES, bits)
            return shared
        ident = self._add(kept, bits)
        self.ids[key] = ident
        return ident

    def _add(self, text: str, bits: int) -> int:
        ident = len(self.names)
        self.names.append(text)
        self.bits.append(bits)
        self._chars += len(text)
        return ident

    def intern_column(self, names: list[Any]) -> npt.NDArray[np.int32]:
        """Ids for a column of names: one dict lookup each, the regular expressions only for new names."""
        get = self.ids.get
        found = list(map(get, names))
        if None in found:
            # Only the new names' positions, found by a C-level scan: a batch of 30k events may hold a few new ones.
            for i in itertools.compress(range(len(found)), map(operator.is_, found, itertools.repeat(None))):
                found[i] = self.intern(names[i])
        return np.array(found, dtype=np.int32)

    def bit_array(self) -> npt.NDArray[np.uint32]:
        return np.array(self.bits, dtype=np.uint32)


def _as_text(value: Any) -> str:
    """A name that is not a string (a number, a list): its short repr, never a deep or huge one."""
    if value is None:
        return ""
    if isinstance(value, bool) or (isinstance(value, int) and -(10**60) < value < 10**60):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return f"<{type(value).__name__}>"
