"""One pass over the events: keep only what the analysis needs, as compact integer columns.

Each kept event costs a few machine words in `array` columns (no Python object per event), and names are interned,
so memory follows the number of GPU and CPU events, not the bytes of JSON that describe them.
"""

from __future__ import annotations

import re
import sys
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from gputriage.tracing.events import Event, to_ns

I64 = npt.NDArray[np.int64]

# Event families. GPU work is recognised as HTA does, by an `args.stream` on a timed event (so MTIA and AMD
# devices count too), except for the categories below, which carry a stream but are not device work.
RUNTIME, CPU_OP, ANNOTATION, PYTHON, SKIP, DEVICE = range(6)
_CATEGORY_FAMILY = {
    "cuda_runtime": RUNTIME,
    "runtime": RUNTIME,
    "cuda_driver": RUNTIME,
    "mtia_runtime": RUNTIME,
    "privateuse1_runtime": RUNTIME,
    "cpu_op": CPU_OP,
    "operator": CPU_OP,
    "user_annotation": ANNOTATION,
    "python_function": PYTHON,
    "gpu_user_annotation": SKIP,
    "trace": SKIP,
    "ac2g": SKIP,
    "fwdbwd": SKIP,
    "async": SKIP,
}

# GPU kind, after HTA's hta/utils/utils.py: communication = ^nccl.*Kernel (this also catches the newer
# ncclDevKernel_* names) or gloo; memory = ^Memcpy|^Memset|^dma (dma: MTIA); everything else computes.
COMPUTE, COMM, MEMORY = 0, 1, 2
_COMM_RE = re.compile(r"^nccl.*Kernel|gloo:")
_MEMORY_RE = re.compile(r"^(Memcpy|Memset|dma)")


# A Python frame as torch.profiler(with_stack=True) names it: "train.py(42): train_step".
_FRAME_RE = re.compile(r"^(?P<file>[^()]+\.py)\((?P<line>\d+)\): ")
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
    return f"{path}:{match['line']}"


def gpu_kind(name: str) -> int:
    if _COMM_RE.search(name):
        return COMM
    if _MEMORY_RE.match(name):
        return MEMORY
    return COMPUTE


def _family(cat: Any, cache: dict[Any, int]) -> int:
    fam = cache.get(cat)
    if fam is None:
        fam = _CATEGORY_FAMILY.get(cat.lower(), DEVICE) if isinstance(cat, str) else DEVICE
        cache[cat] = fam
    return fam


@dataclass
class Columns:
    """Growing columns for one family of events; `finish()` turns them into numpy arrays."""

    ts: array[int] = field(default_factory=lambda: array("q"))
    end: array[int] = field(default_factory=lambda: array("q"))
    name: array[int] = field(default_factory=lambda: array("q"))
    lane: array[int] = field(default_factory=lambda: array("q"))  # stream (GPU) or thread id (CPU)
    corr: array[int] = field(default_factory=lambda: array("q"))  # correlation id, -1 when absent
    extra: array[int] = field(default_factory=lambda: array("q"))  # bytes (GPU) or family (CPU)

    # Positional on purpose: this runs once per kept event, and keyword calls cost measurably more there.
    def add(self, ts: int, end: int, name: int, lane: int, corr: int, extra: int) -> None:  # noqa: PLR0917
        self.ts.append(ts)
        self.end.append(end)
        self.name.append(name)
        self.lane.append(lane)
        self.corr.append(corr)
        self.extra.append(extra)

    def finish(self) -> Table:
        def col(values: array[int]) -> I64:
            return np.frombuffer(values, dtype=np.int64) if len(values) else np.zeros(0, dtype=np.int64)

        return Table(col(self.ts), col(self.end), col(self.name), col(self.lane), col(self.corr), col(self.extra))


@dataclass
class Table:
    ts: I64
    end: I64
    name: I64
    lane: I64
    corr: I64
    extra: I64

    def __len__(self) -> int:
        return len(self.ts)

    def take(self, mask: npt.NDArray[np.bool_] | I64) -> Table:
        return Table(self.ts[mask], self.end[mask], self.name[mask], self.lane[mask], self.corr[mask], self.extra[mask])


@dataclass
class Collected:
    """Everything one pass keeps from a trace."""

    names: list[str]
    threads: list[tuple[Any, Any]]  # (pid, tid) per CPU lane id
    gpu: Table  # lane = stream, extra = bytes (-1 when absent)
    runtime: Table  # lane = thread, extra unused
    cpu: Table  # lane = thread, extra = family (CPU_OP, ANNOTATION, PYTHON)
    call_stacks: dict[int, str]  # CPU row index -> "Call stack" text (older traces)
    events_total: int
    events_dropped: int  # timed events whose ts/dur could not be read exactly (huge or non-numeric)


class Collector:
    """Feed batches of events; `finish()` returns the compact columns."""

    def __init__(self) -> None:
        self._names: dict[str, int] = {}
        self._threads: dict[tuple[Any, Any], int] = {}
        self._families: dict[Any, int] = {}
        self._gpu = Columns()
        self._runtime = Columns()
        self._cpu = Columns()
        self._stacks: dict[int, str] = {}
        self._user_names: dict[int, bool] = {}
        self.events_total = 0
        self.events_dropped = 0

    def _name_id(self, name: Any) -> int:
        key = name if isinstance(name, str) else str(name)
        ident = self._names.get(key)
        if ident is None:
            ident = len(self._names)
            self._names[key] = ident
        return ident

    def _thread_id(self, pid: Any, tid: Any) -> int:
        key = (_hashable(pid), _hashable(tid))
        ident = self._threads.get(key)
        if ident is None:
            ident = len(self._threads)
            self._threads[key] = ident
        return ident

    # One flat loop on purpose: it runs once per event, and every helper call there costs measurable time.
    def feed(self, events: Iterable[Event]) -> None:  # noqa: PLR0912, PLR0915
        """Keep the timed GPU, runtime and CPU events of one batch (the hot loop: one pass, few calls)."""
        families = self._families
        names = self._names
        threads = self._threads
        gpu, runtime, cpu = self._gpu, self._runtime, self._cpu
        stacks = self._stacks
        user_names = self._user_names
        total = dropped = 0
        for ev in events:
            total += 1
            if ev.ph != "X":
                continue
            cat = ev.cat
            fam = families.get(cat)
            if fam is None:
                fam = _family(cat, families)
            if fam == SKIP:
                continue
            args = ev.args
            if fam == DEVICE and (args is None or args.stream is None):
                continue
            name = ev.name
            name_id = names.get(name) if type(name) is str else None
            if name_id is None:
                name_id = self._name_id(name)
            if fam == PYTHON:
                # with_stack traces hold a frame event per Python call; only the user's own frames can say
                # where, so library frames are dropped before any other work (they are most of the events).
                user = user_names.get(name_id)
                if user is None:
                    user = user_names[name_id] = user_frame(name) is not None if type(name) is str else False
                if not user:
                    continue
            ts = to_ns(ev.ts)
            dur = to_ns(ev.dur)
            if ts is None or dur is None:
                dropped += 1
                continue
            end = ts + dur if dur > 0 else ts
            if fam in (DEVICE, RUNTIME):
                corr = args.correlation if args is not None else -1
                if type(corr) is not int or not _I64_MIN <= corr <= _I64_MAX:
                    corr = _int_or(corr, -1)
                if fam == DEVICE:
                    nbytes = args.nbytes  # type: ignore[union-attr]  # DEVICE implies args (checked above)
                    stream = args.stream  # type: ignore[union-attr]
                    if type(stream) is not int or not _I64_MIN <= stream <= _I64_MAX:
                        stream = _int_or(stream, -1)
                    if type(nbytes) is not int or not _I64_MIN <= nbytes <= _I64_MAX:
                        nbytes = _int_or(nbytes, -1)
                    gpu.add(ts, end, name_id, stream, corr, nbytes)
                    continue
            try:
                lane = threads.get((ev.pid, ev.tid))
            except TypeError:  # a list or object as pid/tid
                lane = None
            if lane is None:
                lane = self._thread_id(ev.pid, ev.tid)
            if fam == RUNTIME:
                runtime.add(ts, end, name_id, lane, corr, 0)
                continue
            if args is not None and args.call_stack and isinstance(args.call_stack, str):
                stacks[len(cpu.ts)] = args.call_stack
            cpu.add(ts, end, name_id, lane, -1, fam)
        self.events_total += total
        self.events_dropped += dropped

    def finish(self) -> Collected:
        names = [""] * len(self._names)
        for text, ident in self._names.items():
            names[ident] = text
        threads: list[tuple[Any, Any]] = [("", "")] * len(self._threads)
        for key, ident in self._threads.items():
            threads[ident] = key
        return Collected(
            names=names,
            threads=threads,
            gpu=self._gpu.finish(),
            runtime=self._runtime.finish(),
            cpu=self._cpu.finish(),
            call_stacks=self._stacks,
            events_total=self.events_total,
            events_dropped=self.events_dropped,
        )


_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (int, str, float)) or value is None else str(value)


def _int_or(value: Any, default: int) -> int:
    """Stream ids, correlation ids and byte counts: ints, sometimes strings ("7", "0x0"); else the default."""
    if type(value) is int:
        return value if -(2**63) <= value < 2**63 else default
    if isinstance(value, str):
        try:
            parsed = int(value, 0)
        except ValueError:
            return default
        return parsed if -(2**63) <= parsed < 2**63 else default
    return default
