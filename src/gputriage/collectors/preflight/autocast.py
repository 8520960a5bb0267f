"""`torch.autocast("cuda")` on the stand-in: CPU autocast with CUDA's dtype.

The stand-in's tensors are CPU tensors underneath, which CPU autocast casts; CUDA autocast would skip them. So a
"cuda" autocast region runs as a CPU one with the dtype a GPU would use (float16 unless the script says otherwise),
and `torch.is_autocast_enabled("cuda")` answers for it. The op lists of the two differ in details (CPU autocast
keeps a few more ops in float32); the casts a preflight judges, the model's matmuls and convolutions, are the same.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch.amp import autocast_mode

from gputriage.collectors.patching import Patches

CUDA_DEFAULT_DTYPE = torch.float16


def install(patches: Patches) -> None:
    cls = autocast_mode.autocast
    patches.set(cls, "__init__", _wrap_init(cls.__init__))
    patches.set(torch, "is_autocast_enabled", _wrap_query(torch.is_autocast_enabled))
    patches.set(torch, "get_autocast_dtype", _wrap_query(torch.get_autocast_dtype))
    patches.set(torch, "get_autocast_gpu_dtype", lambda: torch.get_autocast_dtype("cuda"))
    patches.set(torch, "is_autocast_cuda_enabled", lambda: torch.is_autocast_enabled("cuda"))


def _wrap_init(orig: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(orig)
    def __init__(
        self: Any, device_type: str, dtype: torch.dtype | None = None, enabled: bool = True, cache_enabled: Any = None
    ) -> None:
        if device_type == "cuda":
            orig(self, "cpu", dtype or CUDA_DEFAULT_DTYPE, enabled, cache_enabled)
            return
        orig(self, device_type, dtype, enabled, cache_enabled)

    return __init__


def _wrap_query(orig: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(orig)
    def query(device_type: str | None = None) -> Any:
        if device_type is None or device_type == "cuda":
            if not torch._C.is_autocast_enabled("cpu"):
                return orig("cuda") if orig is not torch._C.get_autocast_dtype else CUDA_DEFAULT_DTYPE
            return orig("cpu")
        return orig(device_type)

    return query
