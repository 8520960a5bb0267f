"""torch's C++ code that reads the stand-in's C++ device ("cpu") where a GPU run's reads "cuda"; these read Python's.

`clip_grad_norm_` and the foreach optimizers group parameters by (device, dtype) and move results to each group's
device. Grouped under "cpu", the stand-in's gradients would send their norm to the host and back, a host read that a
GPU run never makes.

`scaled_dot_product_attention(..., is_causal=True)` with dropout takes the math path on the CPU backing, which builds
its causal mask with the query's C++ options: a plain CPU tensor, added to the stand-in's scores. A GPU run has no such
tensor, and the job died with a device mismatch (nn.Transformer with a causal target mask, in training mode). The same
mask, built on the query's device before the call, is what the math path computes.
"""

from __future__ import annotations

from typing import Any

import torch

from gputriage.collectors.patching import Patches
from gputriage.collectors.preflight.marks import is_stand_in
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
    # nn.MultiheadAttention calls this module attribute, as the user's code does
    patches.wrap(torch.nn.functional, "scaled_dot_product_attention", _causal_with_dropout)
    patches.wrap(torch.utils, "swap_tensors", _swap_despite_a_live_graph)


def _swap_despite_a_live_graph(original: Any, t1: Any, t2: Any) -> None:
    """nn.Module.to("cuda") swaps each parameter for its stand-in (StandIn.__tensor_flatten__); torch refuses a swap
    while a graph from an earlier forward still holds the parameter (d2l's shape check runs the net on the CPU, keeps
    its output, then moves the net). On a GPU the move assigns `.data` instead, which a live graph does not stop: the
    stand-in swaps all the same, as torch's own swap does once the graph is gone."""
    try:
        original(t1, t2)
    except RuntimeError as exc:
        if "use_count" not in str(exc) or not (is_stand_in(t1) or is_stand_in(t2)):
            raise
        for name in ("__class__", "__dict__"):
            held = getattr(t1, name)
            setattr(t1, name, getattr(t2, name))
            setattr(t2, name, held)
        torch._C._swap_tensor_impl(t1, t2)


def _causal_with_dropout(  # noqa: PLR0917  # scaled_dot_product_attention's own positional signature
    original: Any,
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *args: Any,
    **kwargs: Any,
) -> Any:
    if is_causal and attn_mask is None and dropout_p > 0 and is_stand_in(query):
        # top-left aligned, as SDPA's own: query i sees keys 0..i. Made from the query (not a factory with its
        # device): nn.MultiheadAttention calls this from inside a __torch_function__ override, where the stand-in's
        # mode does not see factories.
        attn_mask = query.new_ones((query.size(-2), key.size(-2)), dtype=torch.bool).tril()
        is_causal = False
    return original(query, key, value, attn_mask, dropout_p, is_causal, *args, **kwargs)


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
