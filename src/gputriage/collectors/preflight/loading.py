"""`torch.load` during a preflight: a checkpoint meant for the GPU lands on the stand-in.

A checkpoint saved during a preflight holds plain CPU tensors (see StandIn.__reduce_ex__), so a plain CPU torch reads
it. Loading it back during the run keeps the script's intent: `map_location="cuda"` (or a cuda device) puts every
tensor on the stand-in, and a checkpoint saved on a real GPU, loaded without map_location, puts the tensors that were
on `cuda:N` back on `cuda:N` of the stand-in, as torch would on a GPU machine. A checkpoint this run saved, loaded
without map_location (the best model reloaded after training, a resume), puts back on the stand-in exactly the
tensors that were stand-ins when saved (known by content, state.storage_key); its CPU tensors (an RNG state, Adam's
step counts) stay on the CPU, as on a GPU machine.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from gputriage.collectors.patching import Patches
from gputriage.collectors.preflight.state import STATE

_MAX_DEPTH = 6


def install(patches: Patches) -> None:
    patches.set(torch, "load", _wrap_load(torch.load))


def _wrap_load(orig: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(orig)
    def load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        from gputriage.collectors.preflight.redirect import cuda_index

        if map_location is not None and not _is_cuda_location(map_location):
            return orig(f, map_location, *args, **kwargs)
        on_cuda: dict[int, int] = {}  # storage data_ptr -> stand-in index it was saved on

        def keep_on_host(storage: Any, location: str) -> Any:
            if location.startswith("cuda"):
                index = cuda_index(map_location) if map_location is not None else cuda_index(location)
                on_cuda[storage.data_ptr()] = index or 0
            elif map_location is not None:
                on_cuda[storage.data_ptr()] = cuda_index(map_location) or 0
            else:
                saved_from = STATE.saved_index(storage)
                if saved_from is not None:  # this run saved it from a stand-in: a GPU run would load it on cuda
                    on_cuda[storage.data_ptr()] = saved_from
            return storage

        loaded = orig(f, keep_on_host, *args, **kwargs)
        if not on_cuda:
            return loaded
        return _onto_stand_in(loaded, on_cuda, 0)

    return load


def _is_cuda_location(location: Any) -> bool:
    if isinstance(location, torch.device):
        return location.type == "cuda"
    return isinstance(location, str) and location.startswith("cuda")


def _onto_stand_in(value: Any, on_cuda: dict[int, int], depth: int) -> Any:
    """The loaded object with what was saved on cuda:N moved onto the stand-in's cuda:N (containers in place)."""
    if isinstance(value, (torch.Tensor, torch.nn.Module)):
        tensors = [value] if isinstance(value, torch.Tensor) else list(value.parameters())
        index = next((on_cuda[t.untyped_storage().data_ptr()] for t in tensors if _known(t, on_cuda)), None)
        return value if index is None else value.to(f"cuda:{index}")
    if depth >= _MAX_DEPTH:
        return value
    if isinstance(value, dict):
        for key in list(value):
            value[key] = _onto_stand_in(value[key], on_cuda, depth + 1)
        return value
    if isinstance(value, list):
        return [_onto_stand_in(v, on_cuda, depth + 1) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_onto_stand_in(v, on_cuda, depth + 1) for v in value)
    return value


def _known(t: torch.Tensor, on_cuda: dict[int, int]) -> bool:
    return t.untyped_storage().data_ptr() in on_cuda
