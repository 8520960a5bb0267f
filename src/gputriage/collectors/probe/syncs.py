"""Host-device syncs: where the step waited for the device, and how long.

The Python-level wrappers (`.item()`, `.cpu()`, `.tolist()`, `.to("cpu")`, `print`/`repr`) time every observed step,
so the `sync` phase is measured throughout; inside the census window they also record the line and the count. Syncs
that do not pass through those methods (`bool(t)`, `if (x > 0).any():`, `nonzero`) are caught by the op census at the
dispatcher, and on CUDA `torch.cuda.set_sync_debug_mode("warn")` catches the rest.
"""

from __future__ import annotations

import functools
import linecache
import sys
import warnings
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch
from torch.compiler import is_dynamo_compiling

from gputriage.collectors.patching import Patches
from gputriage.collectors.probe.state import ProbeState, capturing, device_type_of, is_cpu_of
from gputriage.collectors.usercode import frame_where, is_framework_file, is_user_file, user_frame
from gputriage.record.compute import HostSync

# Tensor methods that copy a device tensor to the host, and the kind each is reported as.
SYNC_METHODS = {"item": "item", "tolist": "tolist", "cpu": "cpu", "numpy": "numpy", "__repr__": "print"}
CUDA_SYNC_WARNING = "called a synchronizing CUDA operation"


class SyncRecorder:
    """Counts syncs per (kind, line) while the census window is on."""

    def __init__(self, state: ProbeState) -> None:
        self._state = state
        self.recording = False
        self.by_site: dict[tuple[str, str | None], HostSync] = {}
        self._last_step: dict[tuple[str, str | None], int] = {}

    def forget(self) -> None:
        """Drop every count (they were made on a step count that was re-based)."""
        self.by_site.clear()
        self._last_step.clear()

    def record(self, kind: str, device: str, time_s: float, skip_frames: int = 0) -> None:
        start = sys._getframe(skip_frames + 1)
        frame = user_frame(start)
        where = frame_where(frame)
        key = (kind, where)
        entry = self.by_site.get(key)
        if entry is None:
            code = None
            if frame is not None:
                code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() or None
            entry = self.by_site[key] = HostSync(kind=kind, where=where, code=code, device=device)
            entry.library_where = library_issuer(start, frame)
            if frame is not None and frame.f_code.co_name != "<module>" and frame.f_back is not None:
                caller = user_frame(frame.f_back)
                if caller is not None and is_user_file(caller.f_code.co_filename):
                    entry.caller_where = frame_where(caller)
        entry.count += 1
        entry.time_s += time_s
        if self._last_step.get(key) != self._state.step:
            self._last_step[key] = self._state.step
            entry.steps += 1


# torch's own library code that reads a device value by design: GradScaler.step checks `found_inf` on the host,
# nn.Transformer checks whether a mask is causal. The user's call (`scaler.step(opt)`, `self.transformer(...)`) cannot
# drop that read; it is the library's. (torch's tensor protocol, `_tensor.py`'s print and item, is the user's read.)
# torch.distributions is named too: it validates its arguments by default, each constructor and log_prob testing
# its constraints with `if not valid.all()`, a read its line can switch off (validate_args=False; the rule says how).
_TORCH_READS_BY_DESIGN = ("/torch/amp/", "/torch/cuda/amp/", "/torch/nn/", "/torch/optim/", "/torch/distributions/")


def library_issuer(start: FrameType, user: FrameType | None) -> str | None:
    """file:line of the innermost library frame (not torch, not gputriage) below the user's frame, if any, or of
    torch's own code that reads the value by design (_TORCH_READS_BY_DESIGN)."""
    frame: FrameType | None = start
    while frame is not None and frame is not user:
        filename = frame.f_code.co_filename
        by_design = any(part in filename.replace("\\", "/") for part in _TORCH_READS_BY_DESIGN)
        if (by_design or not is_framework_file(filename)) and not is_user_file(filename):
            return frame_where(frame)
        frame = frame.f_back
    return None


class TensorTimers:
    """Wraps Tensor methods so that copies to the device count as h2d and copies back as sync."""

    def __init__(self, state: ProbeState, syncs: SyncRecorder) -> None:
        self._state = state
        self._syncs = syncs
        self._patches = Patches()

    def start(self) -> None:
        tensor = torch.Tensor
        self._patches.wrap(tensor, "to", _by_name("to", self._to))
        self._patches.wrap(tensor, "cuda", _by_name("cuda", self._cuda))
        for name, kind in SYNC_METHODS.items():
            self._patches.wrap(tensor, name, _by_name(name, functools.partial(self._sync_method, kind)))
        if self._state.expected_device == "cuda" and self._state.stand_in_clock is None:
            # on a real GPU (a preflight's stand-in says it itself): the cached blocks freed wait for the device
            self._patches.wrap(torch.cuda, "empty_cache", self._empty_cache)

    def stop(self) -> None:
        self._patches.restore()

    def _to(self, original: Any, t: torch.Tensor, /, *args: Any, **kwargs: Any) -> Any:
        state = self._state
        if not state.clock.running or capturing():
            return original(t, *args, **kwargs)
        source = device_type_of(t)
        target = _target_device_type(args, kwargs)
        if source == "cpu" and target not in (None, "cpu"):
            state.clock.push("h2d")
            try:
                return original(t, *args, **kwargs)
            finally:
                state.clock.pop()
        if source != "cpu" and target == "cpu":
            return _timed_sync(state, self._syncs, lambda: original(t, *args, **kwargs), kind="to-cpu", device=source)
        return original(t, *args, **kwargs)

    def _cuda(self, original: Any, t: torch.Tensor, /, *args: Any, **kwargs: Any) -> Any:
        state = self._state
        if not state.clock.running or capturing() or device_type_of(t) != "cpu":
            return original(t, *args, **kwargs)
        state.clock.push("h2d")
        try:
            return original(t, *args, **kwargs)
        finally:
            state.clock.pop()

    def _empty_cache(self, original: Any, /, *args: Any, **kwargs: Any) -> Any:
        state = self._state
        outside = not state.clock.running or state.in_child or state.in_sync_call
        if outside or not torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
            return original(*args, **kwargs)
        return _timed_sync(state, self._syncs, lambda: original(*args, **kwargs), kind="empty-cache", device="cuda")

    def _sync_method(self, kind: str, original: Any, t: torch.Tensor, /, *args: Any, **kwargs: Any) -> Any:
        state = self._state
        # a CPU tensor first: the common case (an optimizer's step counters), and no sync whatever the state
        if is_cpu_of(t) or state.in_sync_call or not state.clock.running or state.in_child or capturing():
            return original(t, *args, **kwargs)
        device = device_type_of(t)
        return _timed_sync(state, self._syncs, lambda: original(t, *args, **kwargs), kind=kind, device=device)


def _by_name(name: str, make: Callable[..., Any]) -> Callable[..., Any]:
    """`make`, but while Dynamo traces: the tensor's method called by name. A job's `torch.Tensor.to(t, ...)`
    (unbound: a tree_map over a batch) reaches our wrapper, and Dynamo cannot trace the original TensorBase
    descriptor it would call (`fullgraph=True` died, else a graph break); `t.to(...)` it traces as its own."""

    def call(original: Any, t: Any, /, *args: Any, **kwargs: Any) -> Any:
        if is_dynamo_compiling():  # only while Dynamo reads bytecode: its fake-tensor runs call the wrapper again
            return getattr(t, name)(*args, **kwargs)
        if not issubclass(type(t), torch._C.TensorBase):
            # `torch.Tensor.tolist((4, 5))`: torch's own TypeError, which a job may catch to fall back (by type, not
            # isinstance, which would ask the object's own __class__)
            return original(t, *args, **kwargs)
        return make(original, t, *args, **kwargs)

    return call


def _timed_sync(state: ProbeState, syncs: SyncRecorder, call: Callable[[], Any], *, kind: str, device: str) -> Any:
    """Run a host-reading call as the `sync` phase; inside the census window, also record its line."""
    state.in_sync_call += 1
    start_s = state.clock.now()
    state.clock.push("sync")
    try:
        return call()
    finally:
        state.clock.pop()
        state.in_sync_call -= 1
        if syncs.recording:
            syncs.record(kind, device, state.clock.now() - start_s)


def _target_device_type(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    value = kwargs.get("device")
    if value is None and args:
        value = args[0]
    if isinstance(value, torch.device):
        return value.type
    if isinstance(value, str):
        return value.split(":", 1)[0]
    if isinstance(value, int) and not isinstance(value, bool):
        return "cuda"
    if isinstance(value, torch.Tensor):
        return value.device.type
    return None


class CudaSyncDebug:
    """On CUDA, `set_sync_debug_mode("warn")` for the census window, its warnings turned into HostSync records."""

    def __init__(self, syncs: SyncRecorder) -> None:
        self._syncs = syncs
        self._saved_mode: int | None = None
        self._saved_show: Callable[..., None] | None = None
        self._catcher: warnings.catch_warnings[None] | None = None

    def start(self) -> bool:
        if not torch.cuda.is_available() or not torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
            return False
        self._saved_mode = torch.cuda.get_sync_debug_mode()
        self._saved_show = warnings.showwarning
        syncs = self._syncs
        previous = self._saved_show

        def showwarning(message: Any, category: Any, filename: str, lineno: int, *args: Any, **kwargs: Any) -> None:
            if CUDA_SYNC_WARNING in str(message):
                if not syncs._state.in_sync_call:
                    syncs.record("cuda-sync", "cuda", 0.0)
                return
            previous(message, category, filename, lineno, *args, **kwargs)

        warnings.showwarning = showwarning
        self._catcher = warnings.catch_warnings()
        self._catcher.__enter__()
        warnings.filterwarnings("always", message=f".*{CUDA_SYNC_WARNING}.*")
        torch.cuda.set_sync_debug_mode("warn")
        return True

    def stop(self) -> None:
        if self._saved_mode is None:
            return
        torch.cuda.set_sync_debug_mode(self._saved_mode)
        if self._catcher is not None:
            self._catcher.__exit__(None, None, None)
        if self._saved_show is not None:
            warnings.showwarning = self._saved_show
        self._saved_mode = None
