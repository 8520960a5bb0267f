"""The `torch.cuda` (and `torch.accelerator`, `torch.backends.cudnn`) that a script sees during a preflight.

`torch.cuda.is_available()` is True with one device (`--preflight-gpus`), named as the stand-in, with compute
capability 8.0 (bf16 and TF32 supported, like an A100). The calls a training script makes behave as on a GPU whose
work is already done when they return: `synchronize()` returns at once (and counts as a host sync at the caller's
line), events time the host, memory counts the stand-in tensors alive now. Nothing here touches a driver.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from types import ModuleType, SimpleNamespace
from typing import Any

import msgspec
import torch

from gputriage.collectors.patching import Patches
from gputriage.collectors.preflight.marks import is_stand_in
from gputriage.collectors.preflight.redirect import legacy_cuda_types
from gputriage.collectors.preflight.state import STATE

DEVICE_NAME = "gputriage stand-in (CUDA simulated)"
CAPABILITY = (8, 0)
TOTAL_MEMORY_BYTES = 80 * 1024**3
MULTIPROCESSORS = 108
CUDNN_VERSION = 90100


class _Memory(msgspec.Struct):
    peak_bytes: int = 0


_MEMORY = _Memory()


def device_index(device: Any = None) -> int:
    """`torch.cuda`'s reading of a device argument: None/-1 is the current device."""
    from gputriage.collectors.preflight.redirect import check_index, cuda_index

    if device is None or device == -1:
        return STATE.current_index
    index = cuda_index(device)
    if index is None:
        raise ValueError(f"Expected a cuda device, but got: {device}")
    return check_index(index)


# -- devices --------------------------------------------------------------------------------------------------------


def is_available() -> bool:
    return True


def device_count() -> int:
    return STATE.device_count


def current_device() -> int:
    return STATE.current_index


def set_device(device: Any) -> None:
    STATE.current_index = device_index(device)


class device:
    """`with torch.cuda.device(i):` switches the current device for the block."""

    def __init__(self, device: Any) -> None:
        self.idx = -1 if device is None else device_index(device)
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = STATE.current_index
        if self.idx >= 0:
            STATE.current_index = self.idx

    def __exit__(self, *exc: object) -> None:
        STATE.current_index = self.prev_idx


class device_of(device):
    def __init__(self, obj: Any) -> None:
        super().__init__(obj.get_device() if getattr(obj, "is_cuda", False) else -1)


def get_device_name(device: Any = None) -> str:
    device_index(device)
    return DEVICE_NAME


def get_device_capability(device: Any = None) -> tuple[int, int]:
    device_index(device)
    return CAPABILITY


def get_device_properties(device: Any = None) -> SimpleNamespace:
    index = device_index(device)
    return SimpleNamespace(
        name=DEVICE_NAME,
        major=CAPABILITY[0],
        minor=CAPABILITY[1],
        total_memory=TOTAL_MEMORY_BYTES,
        multi_processor_count=MULTIPROCESSORS,
        is_integrated=0,
        is_multi_gpu_board=0,
        max_threads_per_multi_processor=2048,
        warp_size=32,
        L2_cache_size=40 * 1024**2,
        uuid=f"GPU-00000000-0000-0000-0000-{index:012d}",
        pci_bus_id=index,
        pci_device_id=0,
        pci_domain_id=0,
    )


def get_arch_list() -> list[str]:
    return ["sm_80"]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def is_tf32_supported() -> bool:
    return True


def is_initialized() -> bool:
    # False: nothing was initialised, and gputriage's own sync-debug probe (real CUDA only) stays off
    return False


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


# -- host syncs -----------------------------------------------------------------------------------------------------


def _host_sync(kind: str) -> None:
    for listener in list(STATE.sync_listeners):
        listener(kind)


def synchronize(device: Any = None) -> None:
    device_index(device)
    _host_sync("cuda-sync")


def empty_cache() -> None:
    """Nothing is cached on the stand-in, but on CUDA this frees the cached blocks (cudaFree waits for the device),
    and the next step allocates them again: a host sync at the caller's line, as `synchronize()` is."""
    _host_sync("empty-cache")


class Event:
    """A CUDA event on a device whose work is done when launched: it records host time."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.enable_timing = enable_timing
        self._time_s: float | None = None

    def record(self, stream: Any = None) -> None:
        self._time_s = time.perf_counter()

    def wait(self, stream: Any = None) -> None:
        return None

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        _host_sync("cuda-sync")

    def elapsed_time(self, end_event: Event) -> float:
        if not self.enable_timing or not end_event.enable_timing:
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._time_s is None or end_event._time_s is None:
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        _host_sync("cuda-sync")
        return (end_event._time_s - self._time_s) * 1e3

    def ipc_handle(self) -> bytes:
        raise RuntimeError("the preflight's stand-in device has no inter-process events")


class Stream:
    """A CUDA stream on the stand-in: work on it is done when launched."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.device = torch.device("cuda", device_index(device))
        self.priority = priority
        self.cuda_stream = 0

    def wait_event(self, event: Event) -> None:
        return None

    def wait_stream(self, stream: Stream) -> None:
        return None

    def record_event(self, event: Event | None = None) -> Event:
        event = event or Event()
        event.record(self)
        return event

    def query(self) -> bool:
        return True

    def is_capturing(self) -> bool:
        return False  # no CUDA graph capture on the stand-in

    @property
    def device_index(self) -> int:
        return int(self.device.index or 0)

    @property
    def device_type(self) -> int:
        return 1  # c10::DeviceType::CUDA

    @property
    def stream_id(self) -> int:
        return 0

    def synchronize(self) -> None:
        _host_sync("cuda-sync")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other.device == self.device and other.priority == self.priority

    def __hash__(self) -> int:
        return hash((self.device, self.priority))

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


_DEFAULT_STREAMS: dict[int, Stream] = {}


def current_stream(device: Any = None) -> Stream:
    index = device_index(device)
    stream = _DEFAULT_STREAMS.get(index)
    if stream is None:
        stream = _DEFAULT_STREAMS[index] = Stream(index)
    return stream


class StreamContext:
    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def __enter__(self) -> Any:
        return self.stream

    def __exit__(self, *exc: object) -> None:
        return None


def stream(stream: Any) -> StreamContext:
    return StreamContext(stream)


_SYNC_DEBUG_MODE = {"mode": 0}


def set_sync_debug_mode(debug_mode: int | str) -> None:
    levels = {"default": 0, "warn": 1, "error": 2}
    _SYNC_DEBUG_MODE["mode"] = levels.get(debug_mode, 0) if isinstance(debug_mode, str) else int(debug_mode)


def get_sync_debug_mode() -> int:
    return _SYNC_DEBUG_MODE["mode"]


# -- memory ---------------------------------------------------------------------------------------------------------


def memory_allocated(device: Any = None) -> int:
    """Bytes held by the stand-in tensors alive now on that device (each storage once)."""
    from gputriage.collectors.preflight.marks import backing_of, index_of
    from gputriage.collectors.preflight.tensor import StandIn

    index = device_index(device)
    seen: dict[int, int] = {}
    for obj in gc.get_objects():
        if type(obj) is StandIn and index_of(obj) == index:
            storage = backing_of(obj).untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
    allocated = sum(seen.values())
    _MEMORY.peak_bytes = max(_MEMORY.peak_bytes, allocated)
    return allocated


def max_memory_allocated(device: Any = None) -> int:
    """The largest value memory_allocated() has returned (the stand-in does not watch every allocation)."""
    memory_allocated(device)
    return _MEMORY.peak_bytes


def reset_peak_memory_stats(device: Any = None) -> None:
    _MEMORY.peak_bytes = 0


def memory_stats(device: Any = None) -> dict[str, Any]:
    allocated = memory_allocated(device)
    return {
        "allocated_bytes.all.current": allocated,
        "allocated_bytes.all.peak": _MEMORY.peak_bytes,
        "reserved_bytes.all.current": allocated,
        "reserved_bytes.all.peak": _MEMORY.peak_bytes,
        "num_alloc_retries": 0,
        "num_ooms": 0,
    }


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    return f"{DEVICE_NAME}: {memory_allocated(device)} bytes held by stand-in tensors"


def mem_get_info(device: Any = None) -> tuple[int, int]:
    return TOTAL_MEMORY_BYTES - memory_allocated(device), TOTAL_MEMORY_BYTES


# -- random ---------------------------------------------------------------------------------------------------------


def manual_seed(seed: int) -> None:
    STATE.rng.manual_seed(int(seed))


def seed() -> None:
    STATE.rng.manual_seed(torch.initial_seed())


def initial_seed() -> int:
    return STATE.rng.initial_seed()


def get_rng_state(device: Any = "cuda") -> torch.Tensor:
    return STATE.rng.get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "cuda") -> None:
    STATE.rng.set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [STATE.rng.get_state() for _ in range(STATE.device_count)]


def set_rng_state_all(new_states: Any) -> None:
    for state in new_states:
        STATE.rng.set_state(state)


# -- the patch table ------------------------------------------------------------------------------------------------

CUDA_FUNCTIONS: dict[str, Callable[..., Any] | type] = {
    "is_available": is_available,
    "device_count": device_count,
    "current_device": current_device,
    "set_device": set_device,
    "device": device,
    "device_of": device_of,
    "get_device_name": get_device_name,
    "get_device_capability": get_device_capability,
    "get_device_properties": get_device_properties,
    "get_arch_list": get_arch_list,
    "is_bf16_supported": is_bf16_supported,
    "is_tf32_supported": is_tf32_supported,
    "is_initialized": is_initialized,
    "is_current_stream_capturing": lambda: False,
    "init": _nothing,
    "_lazy_init": _nothing,
    "synchronize": synchronize,
    "empty_cache": empty_cache,
    "ipc_collect": _nothing,
    "Event": Event,
    "Stream": Stream,
    "current_stream": current_stream,
    "default_stream": current_stream,
    "stream": stream,
    "StreamContext": StreamContext,
    "set_stream": _nothing,
    "set_sync_debug_mode": set_sync_debug_mode,
    "get_sync_debug_mode": get_sync_debug_mode,
    "memory_allocated": memory_allocated,
    "max_memory_allocated": max_memory_allocated,
    "memory_reserved": memory_allocated,
    "max_memory_reserved": max_memory_allocated,
    "reset_peak_memory_stats": reset_peak_memory_stats,
    "reset_max_memory_allocated": reset_peak_memory_stats,
    "reset_accumulated_memory_stats": _nothing,
    "memory_stats": memory_stats,
    "memory_summary": memory_summary,
    "mem_get_info": mem_get_info,
    "set_per_process_memory_fraction": _nothing,
    "manual_seed": manual_seed,
    "manual_seed_all": manual_seed,
    "seed": seed,
    "seed_all": seed,
    "initial_seed": initial_seed,
    "get_rng_state": get_rng_state,
    "set_rng_state": set_rng_state,
    "get_rng_state_all": get_rng_state_all,
    "set_rng_state_all": set_rng_state_all,
}
# Where torch keeps the same functions under another name (torch.cuda.memory.*, torch.cuda.random.*).
_SUBMODULES = ("memory", "random", "streams")
_NVTX = ("range_push", "range_pop", "mark", "range_start", "range_end")


def install(patches: Patches) -> None:
    """Put the simulated API in place; `patches.restore()` puts torch's back."""
    cuda = torch.cuda
    for name, value in CUDA_FUNCTIONS.items():
        patches.set(cuda, name, value)
        for sub in _SUBMODULES:
            module = getattr(cuda, sub, None)
            if isinstance(module, ModuleType) and name in module.__dict__:
                patches.set(module, name, value)
    nvtx = getattr(cuda, "nvtx", None)
    if nvtx is not None:
        for name in _NVTX:
            if name in nvtx.__dict__:
                patches.set(nvtx, name, _nvtx_call)
    _install_accelerator(patches)
    _install_cudnn(patches)
    for name, legacy in legacy_cuda_types().items():
        if hasattr(cuda, name):
            patches.set(cuda, name, legacy)


def _nvtx_call(*args: Any, **kwargs: Any) -> int:
    return 0


def _install_accelerator(patches: Patches) -> None:
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None:
        return
    functions: dict[str, Callable[..., Any] | type] = {
        "is_available": is_available,
        "current_accelerator": lambda check_available=False: torch.device("cuda"),
        "device_count": device_count,
        "current_device_index": current_device,
        "current_device_idx": current_device,
        "set_device_index": set_device,
        "set_device_idx": set_device,
        "synchronize": synchronize,
        "current_stream": current_stream,
        "device_index": device,
    }
    for name, value in functions.items():
        if name in accelerator.__dict__:
            patches.set(accelerator, name, value)


def _install_cudnn(patches: Patches) -> None:
    cudnn = torch.backends.cudnn
    patches.set(cudnn, "is_available", lambda: True)
    patches.set(cudnn, "version", lambda: CUDNN_VERSION)
    # torch.backends.cudnn is a wrapper module: its functions read the original module's `is_available`, so
    # `is_acceptable` warned "compiled without cuDNN" for every RNN's weights, a line a GPU run never prints.
    patches.set(cudnn, "is_acceptable", _cudnn_acceptable(cudnn.is_acceptable))


def _cudnn_acceptable(original: Any) -> Any:
    def is_acceptable(tensor: Any) -> bool:
        # The stand-in's backing has no cuDNN to run on: RNNs keep their weights unflattened, as they do where
        # cuDNN declines a tensor, and nothing is printed.
        return False if is_stand_in(tensor) else bool(original(tensor))

    return is_acceptable
