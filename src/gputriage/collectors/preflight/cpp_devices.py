"""torch's C++ helpers that group tensors by device read the stand-in's C++ device ("cpu"); these read Python's.

`clip_grad_norm_` and the foreach optimizers group parameters by (device, dtype) and move results to each group's
device. Grouped under "cpu", the stand-in's gradients would send their norm to the host and back, a host read that a
GPU run never makes.
"""

from __future__ import annotations

from typing import Any

import torch

from gputriage.collectors.patching import Patches
from gputriage.collectors.preflight.tensor import StandIn


def install(patches: Patches) -> None:
    patches.set(
        torch._C, "_group_tensors_by_device_and_dtype", _wrap_group(torch._C._group_tensors_by_device_and_dtype)
    )
    # Optimizers and clip_grad_norm_ take the foreach path only for these types; on CUDA they do by default, so the
    # stand-in joins them (as DTensor does) and the census counts the kernels a GPU run launches.
    from torch.optim import optimizer
    from torch.utils import _foreach_utils

    for module in (optimizer, _foreach_utils):
        patches.set(module, "_foreach_supported_types", [*module._foreach_supported_types, StandIn])


def _wrap_group(orig: Any) -> Any:
    def group(tensorlistlist: list[list[Any]], with_indices: bool = False) -> dict[Any, Any]:
        first = tensorlistlist[0] if tensorlistlist else []
        if not any(type(t) is StandIn for t in first):
            return orig(tensorlistlist, with_indices)  # type: ignore[no-any-return]
        groups: dict[tuple[torch.device, torch.dtype], tuple[list[list[Any]], list[int]]] = {}
        for i, t in enumerate(first):
            if t is None:
                continue
            lists, indices = groups.setdefault((t.device, t.dtype), ([[] for _ in tensorlistlist], []))
            for j, tensors in enumerate(tensorlistlist):
                if tensors:  # an empty list (no amsgrad state) stays empty in every group, as torch's does
                    lists[j].append(tensors[i])
            indices.append(i)
        return {key: (lists, indices if with_indices else []) for key, (lists, indices) in groups.items()}

    return group
