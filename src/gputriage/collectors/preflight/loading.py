"""`torch.load` during a preflight: a checkpoint meant for the GPU lands on the stand-in.

A checkpoint saved during a preflight holds plain CPU tensors (see StandIn.__reduce_ex__), so a plain CPU torch reads
it. Loading it back during the run keeps the script's intent: `map_location="cuda"` (or a cuda device) puts every
tensor on the stand-in, and a checkpoint saved on a real GPU, loaded without map_location, puts the tensors that were
on `cuda:N` back on `cuda:N` of the stand-in, as torch would on a GPU machine. A checkpoint this run saved, loaded
without map_location (the best model reloaded after training, a resume), puts back on the stand-in exactly the
tensors that were stand-ins when saved (known by content, state.storage_key); its CPU tensors (an RNG state, Adam's
step counts) stay on the CPU, as on a GPU machine.

`pickle.loads` of a stand-in (pickled by `pickle.dumps`, a multiprocessing queue, any library's deep copy) goes the
same way: torch pickles a tensor's storage by `torch.save` into bytes, read back by `torch.load`, then rebuilds the
tensor on it with `torch._utils._rebuild_tensor_v2`. The storage this run pickled from a stand-in is known again in the
load, and the tensor rebuilt on it is put back on the stand-in's `cuda:N`, as a CUDA tensor comes back on its GPU.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import torch

from gputriage.collectors.patching import Patches
from gputriage.collectors.preflight.state import STATE

_MAX_DEPTH = 6


# Storages that pickle.loads read back from a stand-in's bytes (id -> the storage, weakly, and its cuda index): the
# tensors rebuilt on them go back onto the stand-in.
_FROM_STAND_IN: dict[int, tuple[weakref.ref[Any], int]] = {}
_MAX_REMEMBERED = 4096


def install(patches: Patches) -> None:
    patches.set(torch, "load", _wrap_load(torch.load))
    patches.set(torch._utils, "_rebuild_tensor_v2", _wrap_rebuild(torch._utils._rebuild_tensor_v2))


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
        if isinstance(loaded, (torch.TypedStorage, torch.UntypedStorage)):  # what pickle.loads rebuilds a tensor on
            _remember_storage(loaded, on_cuda, map_location is None)
            return loaded
        if not on_cuda:
            return loaded
        return _onto_stand_in(loaded, on_cuda, 0)

    return load


def _remember_storage(
    storage: torch.TypedStorage | torch.UntypedStorage, on_cuda: dict[int, int], by_content: bool
) -> None:
    """pickle's storage bytes are in torch's legacy format, whose storages are still empty when keep_on_host sees
    them: the one this run pickled from a stand-in is known by its content once loaded."""
    # TypedStorage's own methods warn that it is deprecated; a plain run's pickle.loads warns of nothing
    untyped = storage._untyped_storage if isinstance(storage, torch.TypedStorage) else storage
    index = on_cuda.get(untyped.data_ptr())
    if index is None and by_content:
        index = STATE.saved_index(untyped)
    if index is None:
        return
    if len(_FROM_STAND_IN) < _MAX_REMEMBERED:  # an entry leaves with its storage (the weakref's callback)
        key = id(storage)
        _FROM_STAND_IN[key] = (weakref.ref(storage, lambda _: _FROM_STAND_IN.pop(key, None)), index)


def _wrap_rebuild(orig: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    @functools.wraps(orig)  # the same module and name: what pickle.dumps writes for a plain tensor is unchanged
    def rebuild(storage: Any, *args: Any, **kwargs: Any) -> torch.Tensor:
        tensor = orig(storage, *args, **kwargs)
        found = _FROM_STAND_IN.get(id(storage)) if _FROM_STAND_IN else None
        if found is None or found[0]() is not storage:
            return tensor
        from gputriage.collectors.preflight.redirect import to_stand_in

        moved = to_stand_in(tensor.detach(), found[1])
        return moved.requires_grad_(tensor.requires_grad)

    return rebuild


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
