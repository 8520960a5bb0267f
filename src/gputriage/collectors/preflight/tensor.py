"""The stand-in device's tensor: reports `cuda:N`, holds its values in a backing tensor on the CPU (or on meta).

A wrapper subclass: every aten op on it reaches `__torch_dispatch__` below autograd, where the op runs on the backing
tensors and its results are wrapped again. Before that, the operands are checked the way CUDA kernels check them, so a
CPU tensor mixed into a device op raises CUDA's own error at the user's line (an embedding fed CPU indices, a mask made
without `device=`). The C++ side of the wrapper says "cpu": autograd then runs backward on the calling thread, as it
does for CPU tensors, which a CPU-only build needs (it has no CUDA device guard to run a cuda-typed graph). Python
sees `cuda:N` through the `device` and `is_cuda` properties.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch

from gputriage.collectors.preflight import checks
from gputriage.collectors.preflight.marks import BACKING, INDEX, backing_of
from gputriage.collectors.preflight.state import STATE, Backing
from gputriage.record.stand_in import STAND_IN_LIMIT

aten = torch.ops.aten
_IS_PARAM = "_is_param"
_OURS = frozenset({BACKING, INDEX})


class StandIn(torch.Tensor):
    """A tensor on the simulated CUDA device `cuda:<index>`."""

    @staticmethod
    def __new__(cls, backing: torch.Tensor, index: int = 0, requires_grad: bool = False) -> StandIn:
        STATE.touch_device()
        out = torch.Tensor._make_wrapper_subclass(
            cls,
            backing.size(),
            strides=backing.stride(),
            storage_offset=backing.storage_offset(),
            dtype=backing.dtype,
            layout=backing.layout,
            device=torch.device("cpu"),
            requires_grad=requires_grad,
        )
        out.__dict__[BACKING] = backing
        out.__dict__[INDEX] = index
        return out

    def __init__(self, backing: torch.Tensor, index: int = 0, requires_grad: bool = False) -> None:
        super().__init__()

    # -- what Python sees --------------------------------------------------------------------------------------------

    @property
    def device(self) -> torch.device:  # type: ignore[override]  # torch types it as a plain attribute
        return torch.device("cuda", self.__dict__[INDEX])

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]  # as above
        return True

    @property
    def is_cpu(self) -> bool:  # type: ignore[override]  # as above
        return False

    @property
    def is_meta(self) -> bool:  # type: ignore[override]  # as above
        return False

    @property
    def data(self) -> torch.Tensor:
        return torch._C.TensorBase.data.__get__(self)  # type: ignore[attr-defined,no-any-return]

    @data.setter
    def data(self, value: torch.Tensor) -> None:
        """`p.data = x`, as CUDA does it: the object now holds x's values on x's device. nn.Module._apply moves
        parameters this way (`model.cpu()`, Lightning's teardown), and so does weight init (`w.data = ...`)."""
        set_data(self, value)

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        # torch's printer reads the values (a host sync on a real GPU too) and adds device='cuda:N' from .device;
        # it names a subclass by its class name ("Tensor(", as long as "tensor(") and a parameter "Parameter(...)"
        text = torch._tensor_str._str(self, tensor_contents=tensor_contents)  # type: ignore[no-untyped-call]
        if text.startswith("Parameter(") and text.endswith(")"):
            return "Parameter containing:\n" + _plain_prefix(text[len("Parameter(") : -1])
        return _plain_prefix(text)

    # -- pickling, copying, torch.compile's subclass protocol ----------------------------------------------------------

    def __reduce_ex__(self, proto: Any) -> Any:
        """A checkpoint holds the values as plain CPU tensors (a parameter stays a Parameter), so a plain CPU torch
        loads it without gputriage; under the preflight, `torch.load(..., map_location="cuda")` maps them back."""
        if _sent_to_another_process():
            raise RuntimeError(STAND_IN_LIMIT + _NO_IPC)
        plain = host_copy(self).detach()
        STATE.remember_saved(plain.untyped_storage(), self.__dict__[INDEX])
        if self.__dict__.get(_IS_PARAM):
            from collections import OrderedDict

            return (torch._utils._rebuild_parameter, (plain, self.requires_grad, OrderedDict()))
        plain.requires_grad_(self.requires_grad)
        return plain.__reduce_ex__(proto)  # type: ignore[no-untyped-call]  # torch leaves it untyped

    def __deepcopy__(self, memo: dict[int, Any]) -> StandIn:
        if id(self) in memo:
            return memo[id(self)]  # type: ignore[no-any-return]
        if not self.is_leaf:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at the "
                "moment.  If you were attempting to deepcopy a module, this may be because of a torch.nn.utils."
                "weight_norm usage, see https://github.com/pytorch/pytorch/pull/103001"
            )
        with torch.no_grad():
            new = StandIn(backing_of(self).clone(), self.__dict__[INDEX], requires_grad=self.requires_grad)
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            if key not in _OURS:
                new.__dict__[key] = copy.deepcopy(value, memo)
        if self.grad is not None:
            new.grad = copy.deepcopy(self.grad, memo)
        return new

    def __tensor_flatten__(self) -> tuple[list[str], int]:
        # Also what makes nn.Module.to() swap a moved parameter in place (torch.utils.swap_tensors) instead of
        # replacing it: an optimizer built before model.to("cuda") keeps training the same objects, as on a GPU.
        return [BACKING], self.__dict__[INDEX]

    @staticmethod
    def __tensor_unflatten__(inner: dict[str, torch.Tensor], index: int, outer_size: Any, outer_stride: Any) -> StandIn:
        return StandIn(inner[BACKING], index)

    def __getattr__(self, name: str) -> Any:
        # `self._gputriage_backing` etc. live in __dict__; anything else is a normal missing attribute
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        return _torch_function(func, types, args, kwargs)

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]  # torch's stub is the disabled implementation's
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        return dispatch(func, args, kwargs or {})


# Python names the class "Tensor" in messages and reprs, as it does for a real CUDA tensor.
StandIn.__name__ = StandIn.__qualname__ = "Tensor"


def set_data(t: StandIn, value: torch.Tensor) -> None:
    if isinstance(value, StandIn):
        torch._C.TensorBase.data.__set__(t, value)  # type: ignore[attr-defined]  # sizes, strides, dtype
        t.__dict__[BACKING] = value.__dict__[BACKING]
        t.__dict__[INDEX] = value.__dict__[INDEX]
        return
    # Onto a real device: the object stops being a stand-in, as a CUDA tensor assigned CPU data stops being on CUDA.
    is_param = bool(t.__dict__.get(_IS_PARAM))
    plain = torch.nn.Parameter(value, requires_grad=t.requires_grad) if is_param else value.detach()
    plain.requires_grad_(t.requires_grad)
    grad = t.grad
    if grad is not None:  # `.data =` keeps the gradient (nn.Module._apply moves it next, through `.grad.data =`)
        plain.grad = (host_copy(grad) if isinstance(grad, StandIn) else grad).to(value.device)
    torch.utils.swap_tensors(t, plain)  # type: ignore[no-untyped-call]  # torch leaves it untyped


def _plain_prefix(text: str) -> str:
    return "tensor(" + text[len("Tensor(") :] if text.startswith("Tensor(") else text


TorchFunction = Callable[[Any, Any, tuple[Any, ...], "dict[str, Any] | None"], Any]
# redirect.py binds the stand-in's __torch_function__ when it is imported (it imports this module, so this one cannot
# import it); the observer imports redirect before any stand-in exists.
_TORCH_FUNCTION: list[TorchFunction] = []


def bind_torch_function(fn: TorchFunction) -> None:
    _TORCH_FUNCTION[:] = [fn]


def _torch_function(func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> Any:
    return _TORCH_FUNCTION[0](func, types, args, kwargs)


def wrap(value: torch.Tensor, index: int) -> StandIn:
    return StandIn(value, index)


def host_copy(t: StandIn) -> torch.Tensor:
    """The values on the host, as `.cpu()` gives them (placeholders on a meta backing)."""
    backing = backing_of(t)
    if backing.device.type == "meta":
        from gputriage.collectors.preflight.placeholders import placeholder_tensor

        return placeholder_tensor(backing, "cpu")
    with torch.no_grad(), _no_dispatch():
        return backing.clone()


def _no_dispatch() -> Any:
    return torch.utils._mode_utils.no_dispatch()


# -- the op path -------------------------------------------------------------------------------------------------------


def dispatch(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run `func` on the backing tensors, after CUDA's device checks, and wrap what comes back."""
    STATE.touch_device()
    with STATE.timed():
        return _dispatch(func, args, kwargs)


def _dispatch(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    index = checks.check_devices(func, args, kwargs, _tensors_in(args, kwargs))
    special = _SPECIAL.get(func)
    if special is not None:
        return special(func, args, kwargs, index)
    plain_args, plain_kwargs = _unwrap_all(args), _unwrap_dict(kwargs)
    if STATE.backing is Backing.META and func in _SCALAR_READS:
        out = _placeholder_scalar(plain_args[0])
    elif checks.is_seeded(func):
        with STATE.rng.active():
            out = func(*plain_args, **plain_kwargs)
    else:
        out = func(*plain_args, **plain_kwargs)
    return _rewrap(func, args, kwargs, out, index)


def _tensors_in(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensor operands of an aten op: arguments, and the elements of tensor-list arguments (what
    pytree would find, at a fraction of its cost on every op)."""
    found: list[torch.Tensor] = []
    for value in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, torch.Tensor))
    return found


def _unwrap(value: Any) -> Any:
    if type(value) is StandIn:
        return value.__dict__[BACKING]
    if isinstance(value, (list, tuple)) and any(type(v) is StandIn for v in value):
        return type(value)(_unwrap(v) for v in value)
    return value


def _unwrap_all(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(_unwrap(a) for a in args)


def _unwrap_dict(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: _unwrap(v) for k, v in kwargs.items()} if kwargs else kwargs


def _rewrap(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any, index: int) -> Any:
    plan = _alias_plan(func)
    if plan.mutated_return is not None:
        # an in-place or out= op returns the very tensor it wrote, as on a real device
        target = _arg(args, kwargs, plan.mutated_return)
        if plan.metadata_change and type(target) is StandIn:
            _sync_metadata(target)
        return target
    if plan.mutated_returns:
        return tuple(_arg(args, kwargs, name) for name in plan.mutated_returns)
    return _wrap_out(out, index)


def _wrap_out(out: Any, index: int) -> Any:
    if isinstance(out, torch.Tensor) and type(out) is not StandIn:
        return StandIn(out, index)
    if isinstance(out, (list, tuple)):
        return type(out)(_wrap_out(o, index) for o in out)
    return out


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], position: int | str) -> Any:
    if isinstance(position, str):
        return kwargs[position]
    return args[position]


def _sync_metadata(t: StandIn) -> None:
    """After resize_/set_/unsqueeze_ and friends, give the wrapper its backing's new size and strides."""
    backing = backing_of(t)
    with _no_dispatch():
        meta_in_tls = torch._C._meta_in_tls_dispatch_include()
        torch._C._set_meta_in_tls_dispatch_include(True)
        try:
            aten.as_strided_.default(t, backing.size(), backing.stride(), backing.storage_offset())
        finally:
            torch._C._set_meta_in_tls_dispatch_include(meta_in_tls)


class _AliasPlan:
    __slots__ = ("metadata_change", "mutated_return", "mutated_returns")

    def __init__(self) -> None:
        self.mutated_return: int | str | None = None  # one return that is a mutated input
        self.mutated_returns: tuple[int | str, ...] = ()  # several (out= ops with several outputs)
        self.metadata_change = False


_PLANS: dict[Any, _AliasPlan] = {}
_METADATA_OPS = {"resize_", "set_", "resize_as_", "as_strided_"}


def _alias_plan(func: Any) -> _AliasPlan:
    plan = _PLANS.get(func)
    if plan is not None:
        return plan
    plan = _AliasPlan()
    schema = func._schema
    positions: list[int | str] = []
    for ret in schema.returns:
        info = ret.alias_info
        if info is None or not info.is_write:
            positions = []
            break
        for i, arg in enumerate(schema.arguments):
            if arg.alias_info is not None and arg.alias_info.is_write and arg.alias_info.before_set & info.before_set:
                positions.append(arg.name if arg.kwarg_only else i)
                break
    if len(positions) == 1 and len(schema.returns) == 1:
        plan.mutated_return = positions[0]
    elif positions and len(positions) == len(schema.returns):
        plan.mutated_returns = tuple(positions)
    base = schema.name.split("::")[-1]
    plan.metadata_change = torch.Tag.inplace_view in func.tags or base in _METADATA_OPS
    _PLANS[func] = plan
    return plan


# -- ops that cross the device boundary -----------------------------------------------------------------------------

_SCALAR_READS = {aten._local_scalar_dense.default}


def _placeholder_scalar(backing: torch.Tensor) -> Any:
    from gputriage.collectors.preflight.placeholders import placeholder_scalar, record_read

    record_read("scalar")
    return placeholder_scalar(backing.dtype)


def _to_copy(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], index: int) -> Any:
    """`_to_copy` as torch's C++ code issues it (dtype casts, autograd's ToCopyBackward): the wrapper's C++ device is
    "cpu", so `device=cpu` here means "stay on the stand-in". A move to the host is `.to("cpu")`/`.cpu()` in Python,
    which the redirect handles before C++ sees it."""
    source = args[0]
    target = kwargs.get("device")
    rest = {k: v for k, v in kwargs.items() if k not in ("device", "pin_memory")}
    target_type = torch.device(target).type if target is not None else None
    plain = backing_of(source) if type(source) is StandIn else source
    if target_type not in (None, "cpu", "cuda"):  # e.g. meta: leaves the stand-in
        value = host_copy(source) if type(source) is StandIn else source
        return aten._to_copy.default(value, device=target, **rest)
    new_index = index
    if target is not None and target_type == "cuda" and torch.device(target).index is not None:
        new_index = int(torch.device(target).index or 0)
    out = aten._to_copy.default(plain, device=STATE.backing_device(), **rest)
    return StandIn(out, new_index)


def _copy_(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], index: int) -> Any:
    """`dst.copy_(src)` crosses devices freely, as on CUDA (the host side of a copy is a sync or an h2d)."""
    dst, src = args[0], args[1]
    rest = args[2:]
    src_value = src
    if type(src) is StandIn:  # to another stand-in tensor: the values; to the host: a host read
        src_value = backing_of(src) if type(dst) is StandIn else host_copy(src)
    if type(dst) is StandIn:
        backing = backing_of(dst)
        if type(src_value) is torch.Tensor and src_value.device != backing.device:
            src_value = src_value.to(backing.device)
        with _no_dispatch():
            func(backing, src_value, *rest, **kwargs)
        return dst
    func(dst, src_value, *rest, **kwargs)
    return dst


_SPECIAL: dict[Any, Callable[[Any, tuple[Any, ...], dict[str, Any], int], Any]] = {
    aten._to_copy.default: _to_copy,
    aten.copy_.default: _copy_,
}


# The one way a stand-in device cannot follow the job: into another process. CUDA hands a tensor to a spawned process
# by an IPC handle on the same GPU memory; the stand-in's values live in this process, and the child (a fresh Python,
# without gputriage) has no CUDA at all. Said as the job's error, in words the verdict recognises (STAND_IN_LIMIT).
_NO_IPC = (
    "a tensor on the simulated CUDA device cannot be sent to another process (torch.multiprocessing and spawn share "
    "CUDA tensors by CUDA IPC, which the stand-in does not have): check this part on a GPU machine "
    "(`gputriage run` there), or preflight it with its processes in one (num_processes=1)"
)
_MAX_PICKLER_FRAMES = 24


def _sent_to_another_process() -> bool:
    """Pickled by multiprocessing's ForkingPickler (a spawned Process's arguments, a torch.multiprocessing queue)."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(_MAX_PICKLER_FRAMES):
        if frame is None:
            return False
        if frame.f_code.co_filename.replace("\\", "/").endswith("multiprocessing/reduction.py"):
            return True
        frame = frame.f_back
    return False
