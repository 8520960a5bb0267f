"""`nn.DataParallel` on the stand-in: torch's scatter and gather are CUDA C++ code; these do the same with copies.

A one-GPU DataParallel still scatters its inputs to `device_ids[0]` and gathers the outputs, so a job wrapped in it
runs under the preflight as it would on one GPU.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.parallel import _functions, comm

from gputriage.collectors.patching import Patches


def install(patches: Patches) -> None:
    patches.set(comm, "scatter", scatter)
    patches.set(comm, "gather", gather)
    patches.set(_functions, "_get_stream", lambda device: None)


def scatter(
    tensor: torch.Tensor,
    devices: Any = None,
    chunk_sizes: Any = None,
    dim: int = 0,
    streams: Any = None,
    *,
    out: Any = None,
) -> tuple[torch.Tensor, ...]:
    if out is not None:
        raise NotImplementedError("scatter(out=...) on the preflight's stand-in device")
    targets = [torch.device("cuda", d) if isinstance(d, int) else torch.device(d) for d in devices]
    sizes = list(chunk_sizes) if chunk_sizes is not None else None
    chunks = tensor.chunk(len(targets), dim) if sizes is None else torch.split(tensor, sizes, dim)
    return tuple(chunk.contiguous().to(device) for chunk, device in zip(chunks, targets, strict=False))


def gather(tensors: Any, dim: int = 0, destination: Any = None, *, out: Any = None) -> torch.Tensor:
    if out is not None:
        raise NotImplementedError("gather(out=...) on the preflight's stand-in device")
    if destination in (-1, "cpu"):
        target = torch.device("cpu")
    elif destination is None:
        target = torch.device("cuda", torch.cuda.current_device())
    else:
        target = torch.device("cuda", destination) if isinstance(destination, int) else torch.device(destination)
    return torch.cat([t.to(target) for t in tensors], dim)
