"""Where "cuda" lands: a torch-function mode that sends device="cuda" and `.to("cuda")` / `.cuda()` to the stand-in,
and the Tensor methods that read a stand-in tensor on the host.

A mode sees every torch call of the thread that runs the job, whatever the spelling: `torch.randn(..., device=dev)`,
`x.to(dev)`, `Module.to(dev)` (which calls `Tensor.to`), `torch.set_default_device("cuda")` (a mode above this one
that adds `device=`). Factories made inside C++ composite ops never reach it; they take their device from an operand,
which the stand-in's dispatch handles.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _device as _device_module
from torch.utils._device import _device_constructors

from gputriage.collectors.preflight.marks import backing_of, index_of
from gputriage.collectors.preflight.state import STATE
from gputriage.collectors.preflight.tensor import StandIn, bind_torch_function, host_copy
from gputriage.collectors.probe.state import torch_call

Tensor = torch.Tensor


def unseen() -> Any:
    """Run what the stand-in does on its backing outside any dispatch mode (gputriage's op census): it is the
    simulated device's work, not the job's CPU work."""
    return torch.utils._python_dispatch._disable_current_modes()


Handler = Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]


def cuda_index(device: Any) -> int | None:
    """The stand-in index a device argument names, or None when it is not a CUDA device."""
    if isinstance(device, StandIn):
        return index_of(device)
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    if isinstance(device, str) and device.startswith("cuda"):
        device = torch.device(device)
    if isinstance(device, torch.device) and device.type == "cuda":
        return STATE.current_index if device.index is None else device.index
    return None


def check_index(index: int) -> int:
    if index < 0 or index >= STATE.device_count:
        raise RuntimeError(
            "CUDA error: invalid device ordinal\nCUDA kernel errors might be asynchronously reported at some other "
            "API call, so the stacktrace below might be incorrect."
        )
    return index


def to_stand_in(t: Tensor, index: int, dtype: torch.dtype | None = None) -> StandIn:
    """A host tensor copied onto the stand-in `cuda:index` (out of sight of gputriage's op census, which would count
    the copy on the backing as CPU work: on a GPU it is a copy engine's)."""
    with torch.no_grad(), unseen():
        moved = t.to(STATE.backing_device(), dtype=dtype, copy=True)
    return StandIn(moved, check_index(index), requires_grad=False)


def stand_in_torch_function(func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
    """StandIn.__torch_function__: its own methods (.cpu(), .numpy(), ...) in any thread; the rest as torch does."""
    handler = handler_for(func)
    with STATE.timed(), torch._C.DisableTorchFunctionSubclass():
        if handler is not None:
            return handler(func, args, kwargs or {})
        return func(*args, **(kwargs or {}))


bind_torch_function(stand_in_torch_function)  # the stand-in class dispatches here (see tensor.py)


_PARSE_TO = torch._C._nn._parse_to


class CudaRedirect(TorchFunctionMode):
    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        STATE.count_mode_call()
        kwargs = kwargs or {}
        with torch_call(args, kwargs):
            return self._call(func, args, kwargs)

    def _call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if func in _FROM_DATA and args and isinstance(args[0], (list, tuple)):
            args = (_on_host(args[0]), *args[1:])
        handler = handler_for(func)
        if handler is not None:
            return handler(func, args, kwargs)
        if func is _PARSE_TO:  # Module.to(device=...) parses its arguments: a device read, not a tensor made
            if len(args) == 1 and isinstance(args[0], StandIn):  # Module.to(tensor): that tensor's device and dtype
                return func(device=args[0].device, dtype=args[0].dtype, **kwargs)
            # Module.to(0), the DDP tutorial's `model.to(gpu_id)`: an int is a CUDA index, read without asking the
            # (absent) accelerator, as Tensor.to's arguments are
            kw = {k: (_as_device(v) if k == "device" else v) for k, v in kwargs.items()}
            return func(*(_as_device(a) for a in args), **kw)
        device = kwargs.get("device")
        if device is None and _device_module.CURRENT_DEVICE is not None and func in _device_constructors():
            # torch.set_default_device("cuda") puts its own mode below this one: its device is read here
            device = _device_module.CURRENT_DEVICE
        if device is not None:
            index = cuda_index(device)
            if index is not None:
                return _factory(func, args, kwargs, index)
        return func(*args, **kwargs)


# Factories that read their data's values: a list holding device tensors (`torch.tensor([R])`, R a 0-d CUDA tensor,
# the actor-critic example's returns) is read on the host, one copy each, as CUDA does; the stand-in's C++ side has no
# data of its own to read.
_FROM_DATA = frozenset({torch.tensor, torch.as_tensor, torch.asarray})
_MAX_DATA_DEPTH = 8


def _on_host(data: Any, depth: int = 0) -> Any:
    """The nested list or tuple with each stand-in tensor copied to the host (`.cpu()`: counted as the host read it
    is on a GPU)."""
    if isinstance(data, StandIn):
        return data.cpu()
    if depth >= _MAX_DATA_DEPTH or not isinstance(data, (list, tuple)) or not any(_holds_stand_in(d) for d in data):
        return data
    copied = [_on_host(d, depth + 1) for d in data]
    return copied if isinstance(data, list) else tuple(copied)


def _holds_stand_in(value: Any) -> bool:
    return isinstance(value, StandIn) or (isinstance(value, (list, tuple)) and any(_holds_stand_in(v) for v in value))


def _factory(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], index: int) -> Any:
    """`torch.randn(..., device="cuda")` and friends: made on the backing device, in the stand-in's random stream."""
    check_index(index)
    call_kwargs = dict(kwargs, device=STATE.backing_device())
    call_kwargs.pop("pin_memory", None)
    requires_grad = bool(call_kwargs.pop("requires_grad", False))
    plain_args = tuple(host_copy(a) if isinstance(a, StandIn) else a for a in args)
    with STATE.timed(), STATE.rng.active(), unseen():  # a device kernel, not CPU work: out of the census's sight
        out = func(*plain_args, **call_kwargs)
    if isinstance(out, Tensor) and not isinstance(out, StandIn):
        return StandIn(out, index, requires_grad=requires_grad)
    return out


# -- Tensor methods -------------------------------------------------------------------------------------------------


def _to(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    t = args[0]
    device, dtype, copy = _to_arguments(args[1:], kwargs)
    index = cuda_index(device) if device is not None else None
    if isinstance(t, StandIn) and device is not None:
        return _move_stand_in(t, device, index, dtype, copy)
    if isinstance(t, StandIn) or index is None:  # a cast on the stand-in, or a host tensor staying on the host
        return func(*args, **kwargs)
    return _onto(t, index, dtype)


def _to_arguments(rest: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, torch.dtype | None, bool]:
    """(device, dtype, copy) of a `Tensor.to` call, read the way torch reads them, stand-ins' devices as cuda."""
    if rest and isinstance(rest[0], Tensor):  # x.to(other)
        copy = bool(rest[2]) if len(rest) > 2 else bool(kwargs.get("copy", False))
        return rest[0].device, rest[0].dtype, copy
    plain_rest = tuple(_as_device(a) for a in rest)
    kw = {k: (_as_device(v) if k == "device" else v) for k, v in kwargs.items() if k != "copy"}
    # non_blocking is read and dropped: the stand-in copies synchronously, and timing is not what a preflight judges
    device, dtype, _non_blocking, _memory_format = torch._C._nn._parse_to(*plain_rest, **kw)
    return device, dtype, bool(kwargs.get("copy", False))


def _move_stand_in(t: StandIn, device: Any, index: int | None, dtype: torch.dtype | None, copy: bool) -> Tensor:
    if index is None:  # to the host (or another device): the values leave the stand-in
        return leave(t, device, dtype)
    if index == index_of(t):
        if (dtype is None or dtype == t.dtype) and not copy:
            return t
        return Tensor.to(t, dtype=dtype or t.dtype, copy=copy)  # a cast on the device: torch's op, with its autograd
    with torch.no_grad():
        out = backing_of(t).to(dtype=dtype, copy=True)
    return StandIn(out, check_index(index), requires_grad=t.requires_grad and out.is_floating_point())


def _as_device(value: Any) -> Any:
    """An int device means CUDA to torch (`.to(0)`); parsed as such without asking the (absent) accelerator."""
    if isinstance(value, StandIn):
        return value.device
    if isinstance(value, int) and not isinstance(value, bool):
        return torch.device("cuda", value)
    return value


def _onto(t: Tensor, index: int, dtype: torch.dtype | None) -> StandIn:
    """A host tensor's copy onto the stand-in, as a differentiable op when it requires grad (like `.to("cuda")`)."""
    if t.requires_grad and torch.is_grad_enabled():
        return _ToStandIn.apply(t, index, dtype)  # type: ignore[no-untyped-call,no-any-return]
    return to_stand_in(t, index, dtype)


class _ToStandIn(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, t: Tensor, index: int, dtype: torch.dtype | None) -> StandIn:
        ctx.source_dtype = t.dtype
        return to_stand_in(t.detach(), index, dtype)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        host = host_copy(grad) if isinstance(grad, StandIn) else grad
        return host.to(ctx.source_dtype), None, None


def leave(t: StandIn, device: Any = "cpu", dtype: torch.dtype | None = None) -> Tensor:
    """A stand-in tensor's copy on the host, differentiable like `.cpu()` (a loss computed on the host still trains
    the model on the device)."""
    if t.requires_grad and torch.is_grad_enabled():
        return _FromStandIn.apply(t, device, dtype)  # type: ignore[no-untyped-call,no-any-return]
    return host_copy(t).to(device=device, dtype=dtype)


class _FromStandIn(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, t: StandIn, device: Any, dtype: torch.dtype | None) -> Tensor:
        ctx.index, ctx.source_dtype = index_of(t), t.dtype
        return host_copy(t).to(device=device, dtype=dtype)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        return to_stand_in(grad, ctx.index, ctx.source_dtype), None, None


def _cuda(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    t = args[0]
    device = args[1] if len(args) > 1 else kwargs.get("device")
    index = STATE.current_index if device is None else cuda_index(device)
    if index is None:
        raise RuntimeError(f"Invalid device, must be cuda device (got {device!r})")
    if isinstance(t, StandIn) and index == index_of(t):
        return t
    if isinstance(t, StandIn):
        return StandIn(backing_of(t).clone(), check_index(index))
    return _onto(t, index, None)


def _cpu(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    t = args[0]
    if isinstance(t, StandIn):
        return leave(t)
    return func(*args, **kwargs)


def _numpy(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    t = args[0]
    if isinstance(t, StandIn):
        force = bool(args[1]) if len(args) > 1 else bool(kwargs.get("force", False))
        if not force:
            raise TypeError(
                f"can't convert {t.device} device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
                "memory first."
            )
        return host_copy(t).detach().numpy()
    return func(*args, **kwargs)


def _tolist(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    t = args[0]
    if isinstance(t, StandIn):
        return host_copy(t).tolist()
    return func(*args, **kwargs)


def _type(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    t = args[0]
    target = args[1] if len(args) > 1 else kwargs.get("dtype")
    if target is None:
        if isinstance(t, StandIn) and not kwargs:
            return backing_of(t).type().replace("torch.", "torch.cuda.", 1)
        return func(*args, **kwargs)
    if isinstance(target, LegacyCudaType):  # t.type(torch.cuda.FloatTensor), the class that stands in for it
        return _to(Tensor.to, (t, "cuda", target.dtype), {})
    if type(target).__name__ == "tensortype":  # t.type(torch.FloatTensor): the class, named as its string form
        target = f"{target.__module__}.{target.__name__}"
    if isinstance(target, str):  # t.type("torch.cuda.FloatTensor"): a legacy type name carries the device
        on_cuda = target.startswith("torch.cuda.")
        dtype = _LEGACY_TYPES.get(target.replace("torch.cuda.", "torch.", 1))
        if dtype is not None:
            return _to(Tensor.to, (t, "cuda" if on_cuda else "cpu", dtype), {})
    return func(*args, **kwargs)


_LEGACY_TYPES = {
    "torch.FloatTensor": torch.float32,
    "torch.DoubleTensor": torch.float64,
    "torch.HalfTensor": torch.float16,
    "torch.BFloat16Tensor": torch.bfloat16,
    "torch.LongTensor": torch.int64,
    "torch.IntTensor": torch.int32,
    "torch.ShortTensor": torch.int16,
    "torch.CharTensor": torch.int8,
    "torch.ByteTensor": torch.uint8,
    "torch.BoolTensor": torch.bool,
}


class LegacyCudaType:
    """`torch.cuda.FloatTensor` and its siblings during a preflight. torch without CUDA refuses them ("type
    torch.cuda.FloatTensor not available"), yet old scripts (PyTorch-GAN's `Tensor = torch.cuda.FloatTensor if cuda
    else torch.FloatTensor`) build every tensor with them: `Tensor(n, 1)`, `Tensor(np_array)`, `t.type(Tensor)`, and
    `isinstance(t, Tensor)`. Each becomes the same tensor on the stand-in device."""

    def __init__(self, name: str, dtype: torch.dtype) -> None:
        self.__name__ = self.__qualname__ = name
        self.__module__ = "torch.cuda"
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"<class 'torch.cuda.{self.__name__}'>"

    def __call__(self, *args: Any, **kwargs: Any) -> Tensor:
        if kwargs.get("device") is not None:
            raise TypeError(f"{self.__name__}: legacy constructor expects device type: cuda but device type: ...")
        if not args:
            return torch.empty(0, dtype=self.dtype, device="cuda")
        if len(args) == 1 and not isinstance(args[0], (int, torch.Size)):
            data = args[0]
            if isinstance(data, Tensor):
                return data.to("cuda", self.dtype)
            return torch.tensor(data, dtype=self.dtype, device="cuda")
        return torch.empty(*args, dtype=self.dtype, device="cuda")

    def __instancecheck__(self, instance: Any) -> bool:
        return isinstance(instance, StandIn) and instance.dtype == self.dtype


def legacy_cuda_types() -> dict[str, LegacyCudaType]:
    """torch.cuda's legacy tensor classes, by attribute name, as the preflight's stand-ins."""
    return {
        name.removeprefix("torch."): LegacyCudaType(name.removeprefix("torch."), dtype)
        for name, dtype in _LEGACY_TYPES.items()
    }


def _type_as(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`z.type_as(imgs)`: torch's C++ takes the device from the other tensor's C++ options, which for a stand-in say
    "cpu"; the device and dtype are read in Python instead."""
    t, other = args[0], args[1] if len(args) > 1 else kwargs["other"]
    if isinstance(other, StandIn) or isinstance(t, StandIn):
        return _to(Tensor.to, (t, other.device, other.dtype), {})
    return func(*args, **kwargs)


def _get_device(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    t = args[0]
    return index_of(t) if isinstance(t, StandIn) else func(*args, **kwargs)


def _through_backing(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """data_ptr / storage: the backing's (identity checks such as tied weights or safetensors' sharing still work)."""
    t = args[0]
    if isinstance(t, StandIn):
        return func(backing_of(t), *args[1:], **kwargs)
    return func(*args, **kwargs)


def _is_pinned(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return is_pinned(args[0])


def _pin_memory(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return pin_memory(args[0])


def is_pinned(t: Tensor, device: Any = None) -> bool:
    return not isinstance(t, StandIn) and bool(STATE.pinned.get(t))


def pin_memory(t: Tensor, device: Any = None) -> Tensor:
    """A copy in "page-locked" memory: a CPU tensor that is_pinned() knows (the stand-in has no DMA to speed up)."""
    if isinstance(t, StandIn) or t.device.type != "cpu":
        raise RuntimeError(f"cannot pin '{t.type()}' only dense CPU tensors can be pinned")
    if STATE.pinned.get(t):
        return t
    out = t.clone()
    STATE.pinned[out] = True
    return out


def record_stream(t: Tensor, stream: Any) -> None:
    """Tensor.record_stream during a preflight: the stand-in's streams are done when launched, nothing to keep alive
    (patched on the class: torch's argument parser refuses the simulated stream before any mode sees the call)."""
    if not isinstance(t, StandIn):
        _RECORD_STREAM(t, stream)


_RECORD_STREAM = Tensor.record_stream


def _new_tensor(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    t = args[0]
    if isinstance(t, StandIn) and kwargs.get("device") is None:
        plain = func(backing_of(t), *args[1:], **kwargs)
        return StandIn(plain.to(STATE.backing_device()), index_of(t), requires_grad=plain.requires_grad)
    return func(*args, **kwargs)


def _as_tensor(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if len(args) >= 3 and "device" not in kwargs:  # as_tensor(data, dtype, device)
        args, kwargs = args[:2], dict(kwargs, device=args[2])
    index = cuda_index(kwargs.get("device"))
    data = args[0]
    if index is None:
        return func(*args, **kwargs)
    if isinstance(data, StandIn) and index_of(data) == index:
        dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
        return data if dtype in (None, data.dtype) else data.to(dtype)
    return _factory(func, args, kwargs, index)


def _share_memory(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    t = args[0]
    return t if isinstance(t, StandIn) else func(*args, **kwargs)  # a no-op for CUDA tensors


def _format(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    t, spec = args[0], args[1]
    if isinstance(t, StandIn):
        # torch formats a 0-d tensor as its number (a host read), anything else as its repr
        return t.item().__format__(spec) if t.dim() == 0 else object.__format__(t, spec)
    return func(*args, **kwargs)


def _device(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`torch.device(0)` means the current accelerator's device 0: CUDA's, here."""
    if len(args) == 1 and not kwargs and isinstance(args[0], int) and not isinstance(args[0], bool):
        return torch.device("cuda", args[0])
    return func(*args, **kwargs)


_HANDLERS: dict[Any, Handler] = {
    torch.device: _device,
    Tensor.__format__: _format,
    Tensor.to: _to,
    Tensor.cuda: _cuda,
    Tensor.cpu: _cpu,
    Tensor.numpy: _numpy,
    Tensor.__array__: _numpy,
    Tensor.tolist: _tolist,
    Tensor.type: _type,
    Tensor.type_as: _type_as,
    Tensor.get_device: _get_device,
    Tensor.data_ptr: _through_backing,
    Tensor.untyped_storage: _through_backing,
    Tensor.is_pinned: _is_pinned,
    Tensor.pin_memory: _pin_memory,
    Tensor.new_tensor: _new_tensor,
    Tensor.share_memory_: _share_memory,
    torch.as_tensor: _as_tensor,
}
_HANDLER_NAMES = frozenset(getattr(f, "__name__", "") for f in _HANDLERS)
_RESOLVED: dict[Any, Handler | None] = {}


def handler_for(func: Any) -> Handler | None:
    """The handler of a torch API function, also when someone (gputriage's own probe, a library) has replaced the
    Tensor method with a wrapper: torch then passes the wrapper, found by name on the class."""
    handler = _HANDLERS.get(func)
    if handler is not None or getattr(func, "__name__", None) not in _HANDLER_NAMES:
        return handler
    try:
        return _RESOLVED[func]
    except (KeyError, TypeError):
        pass
    inner = func
    while inner is not None and handler is None:
        handler = _HANDLERS.get(inner)
        inner = getattr(inner, "__wrapped__", None)
    with contextlib.suppress(TypeError):
        _RESOLVED[func] = handler
    return handler
