"""CUDA's device checks, applied to the stand-in's operands before an op runs.

A CUDA kernel refuses a CPU tensor next to a device tensor, except a 0-d CPU scalar (TensorIterator ops take it as a
number) and the ops built to cross devices: copies and indexing with CPU indices. The messages are CUDA's own
wordings, so the traceback and gputriage's rules read the same as on a GPU.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from gputriage.collectors.preflight.marks import backing_of, index_of, is_stand_in
from gputriage.collectors.preflight.state import STATE
from gputriage.collectors.probe.state import given_by_caller, in_backward, note_host_operand

aten = torch.ops.aten

# Ops that CUDA runs with host tensors among the operands.
_CROSSING = {
    aten.copy_.default,
    aten._to_copy.default,
    aten.index.Tensor,
    aten.index_put_.default,
    aten.index_put.default,
    aten._index_put_impl_.default,
    aten._local_scalar_dense.default,
    aten.is_same_size.default,
    aten.lift_fresh.default,
    aten.lift_fresh_copy.default,
    aten.set_.source_Tensor,
}
_CONVOLUTIONS = {"convolution", "_convolution", "cudnn_convolution", "conv_depthwise2d", "convolution_overrideable"}
_MASKED_FILL = {"masked_fill", "masked_fill_"}
# Ops whose CUDA check names another op (embedding runs index_select on the device).
_REPORTED_AS = {"embedding": ("index", "_index_select")}
_RNN_LAYERS = frozenset({"mkldnn_rnn_layer"})
_SEEDED: dict[Any, bool] = {}
_POINTWISE: dict[Any, bool] = {}


# Indexing crosses devices one way only: a device tensor takes host indices, a host tensor refuses device ones.
_INDEXING = {
    aten.index.Tensor,
    aten.index_put_.default,
    aten.index_put.default,
    aten._index_put_impl_.default,
}


def _check_host_indexed(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """`labels[idx]` with `labels` on the CPU and `idx` on the device: CUDA's index check raises (IndexError); the
    stand-in would compute it, and hand back a device tensor that hides the mistake for the rest of the step."""
    target = args[0] if args else kwargs.get("self")
    if not isinstance(target, torch.Tensor) or is_stand_in(target) or target.dim() == 0:
        return
    indices = args[1] if len(args) > 1 else kwargs.get("indices")
    if any(is_stand_in(i) for i in indices or () if i is not None) and not in_backward() and given_by_caller(target):
        note_host_operand(target)
        raise IndexError(
            f"indices should be either on cpu or on the same device as the indexed tensor ({target.device})"
        )


def check_devices(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], flat: list[Any]) -> int:
    """The stand-in index the op runs on; raises CUDA's error for an operand on another device."""
    if func in _INDEXING:
        _check_host_indexed(func, args, kwargs)
    index: int | None = None
    foreign: torch.Tensor | None = None
    for value in flat:
        if is_stand_in(value):
            if index is None:
                index = index_of(value)
            elif index_of(value) != index and func not in _CROSSING:
                raise _mismatch(func, args, kwargs, value, (f"cuda:{index}", f"cuda:{index_of(value)}"))
        elif isinstance(value, torch.Tensor) and foreign is None:
            if value.dim() == 0 and value.device.type == "cpu":
                continue  # a CPU scalar rides along with device tensors
            foreign = value
    if index is None:
        index = STATE.current_index
    if foreign is not None and func not in _CROSSING and not in_backward() and given_by_caller(foreign):
        note_host_operand(foreign)
        raise _mismatch(func, args, kwargs, foreign, (f"cuda:{index}", str(foreign.device)))
    return index


def is_host_read(func: Any, tensors: list[Any]) -> bool:
    """Whether an op that looks like a device-to-host copy reads the stand-in's values on the host.

    `_to_copy` of a stand-in tensor never does: torch's C++ side issues it for casts with the wrapper's own ("cpu")
    options, and a move to the host in Python (`.cpu()`, `.to("cpu")`) is handled, and counted, before C++ sees it.
    A `copy_` into a host tensor does, except inside backward, where it is the adoption described in in_backward.
    """
    if not any(is_stand_in(t) for t in tensors):
        return True
    if func is aten._to_copy.default:
        return False
    if func is aten.copy_.default:
        return not in_backward()
    return True


def is_seeded(func: Any) -> bool:
    seeded = _SEEDED.get(func)
    if seeded is None:
        seeded = _SEEDED[func] = torch.Tag.nondeterministic_seeded in func.tags
    return seeded


def _is_pointwise(func: Any) -> bool:
    pointwise = _POINTWISE.get(func)
    if pointwise is None:
        pointwise = _POINTWISE[func] = torch.Tag.pointwise in func.tags
    return pointwise


def _mismatch(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], odd: torch.Tensor, devices: tuple[str, str]
) -> RuntimeError:
    """CUDA's error for `odd` (on `devices[1]`) among operands on `devices[0]`, in the wording of that op's check."""
    device, odd_device = devices
    base = func._schema.name.split("::")[-1]
    if base in _CONVOLUTIONS and len(args) >= 2:
        return RuntimeError(_conv_message(args[0], args[1]))
    name = _argument_name(func, args, kwargs, odd)
    if base in _RNN_LAYERS:
        # nn.LSTM: the CPU backing runs it as one mkldnn layer; CUDA's RNN checks name the input against the
        # parameters, then against the hidden state
        other = "parameter" if name.startswith("weight") else "hidden"
        at = (odd_device, device) if name == "input" else (device, odd_device)
        return RuntimeError(
            f"Input and {other} tensors are not at the same device, found input tensor at {at[0]} and {other} "
            f"tensor at {at[1]}"
        )
    if base in _MASKED_FILL:
        # CUDA's check names the mask and self whichever of the two is the odd one
        mask_device, self_device = (device, odd_device) if name == "self" else (odd_device, device)
        return RuntimeError(
            f"expected self and mask to be on the same device, but got mask on {mask_device} and self on {self_device}"
        )
    if _is_pointwise(func):
        return RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, {device} and {odd_device}!"
        )
    name, method = _REPORTED_AS.get(base, (name, _wrapper_name(base, func._overloadname)))
    if base in _REPORTED_AS and args and odd is args[0]:
        # the weight is the CPU tensor: CUDA's check starts from it (`self`), so the device index is the odd one
        device, odd_device = odd_device, device
    elif base not in _REPORTED_AS:
        # CUDA's wrapper takes the first tensor argument's device as the common one and names the first argument on
        # another: with the model on the CPU and the batch moved, addmm's `self` (the bias) is on the CPU and `mat1`
        # is the odd one ("mat1 is on cuda:0, different from other tensors on cpu")
        name, device, odd_device = _first_odd(func, args, kwargs) or (name, device, odd_device)
    return RuntimeError(
        f"Expected all tensors to be on the same device, but got {name} is on {odd_device}, different from other "
        f"tensors on {device} (when checking argument in method wrapper_CUDA_{method})"
    )


def _wrapper_name(base: str, overload: str) -> str:
    """The kernel wrapper CUDA's message names: `addmm` (a structured kernel: `wrapper_CUDA_addmm`), `_index_select`
    (not structured, its default overload: `wrapper_CUDA__index_select`), as torchgen generates them."""
    qualified = base if overload == "default" else f"{base}.{overload}"
    if qualified in _structured_ops():
        return base if overload == "default" else f"{base}_{overload}"
    return f"_{base}" if overload == "default" else base


@functools.cache
def _structured_ops() -> frozenset[str]:
    """The ops torch generates structured kernels for, read from the native_functions.yaml that torch's wheel ships
    in torchgen (a text scan: only at a crash's message, once); empty when it is not there."""
    spec = importlib.util.find_spec("torchgen")
    if spec is None or spec.origin is None:
        return frozenset()
    path = Path(spec.origin).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return frozenset()
    found = set()
    for entry in re.split(r"^- func: ", text, flags=re.MULTILINE)[1:]:
        head, _, body = entry.partition("\n")
        if re.search(r"^  (structured: True|structured_delegate: )", body, flags=re.MULTILINE):
            found.add(head.split("(", 1)[0])
    return frozenset(found)


def _first_odd(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, str, str] | None:
    """(name, common device, its device) of the first tensor argument, in schema order, whose device differs from the
    first tensor argument's (a 0-d CPU tensor rides along, as check_devices lets it)."""
    common: str | None = None
    for name, value in _schema_values(func, args, kwargs):
        for t in value if isinstance(value, (list, tuple)) else (value,):
            if not isinstance(t, torch.Tensor) or (not is_stand_in(t) and t.dim() == 0 and t.device.type == "cpu"):
                continue
            where = f"cuda:{index_of(t)}" if is_stand_in(t) else str(t.device)
            if common is None:
                common = where
            elif where != common:
                return name, common, where
    return None


def _schema_values(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(name, value) of each argument of the op's schema, in its order, from the positional and keyword arguments."""
    for i, arg in enumerate(func._schema.arguments):
        yield str(arg.name), kwargs.get(arg.name) if arg.kwarg_only or i >= len(args) else args[i]


def _argument_name(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], odd: torch.Tensor) -> str:
    for name, value in _schema_values(func, args, kwargs):
        if value is odd or (isinstance(value, (list, tuple)) and any(v is odd for v in value)):
            return name
    return "tensor"


def _conv_message(data: Any, weight: Any) -> str:
    first, second = tensor_type_name(data), tensor_type_name(weight)
    tail = " or input should be a MKLDNN tensor and weight is a dense tensor" if ".cuda." not in first else ""
    return f"Input type ({first}) and weight type ({second}) should be the same{tail}"


def tensor_type_name(t: Any) -> str:
    """'torch.cuda.FloatTensor' for a stand-in, 'torch.FloatTensor' for a CPU tensor (legacy type names)."""
    if is_stand_in(t):
        return backing_of(t).type().replace("torch.", "torch.cuda.", 1)
    return str(t.type()) if isinstance(t, torch.Tensor) else type(t).__name__
