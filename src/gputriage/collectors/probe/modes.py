"""gputriage's dispatch modes: their base class, and how one is taken off torch's mode stack, wherever it is in it.

The op census pushes a dispatch mode for a few steps. The user's code may push its own on top meanwhile and keep it:
taking ours out must leave theirs in place and in order, or our mode would stay in the job for good.

torch wraps a mode's `__torch_dispatch__` in `torch._disable_dynamo` when the class is made, so that Dynamo never
compiles the mode's own frames; that wrapper imports torch._dynamo at its first call. In a job that never loads
Dynamo (no torch.compile, no torch.optim: an inference or evaluation script) that import was ours alone: 800 modules
(sympy among them), a second and 80 MB at the job's first op. Dynamo can only compile a frame once it is loaded, so
our modes are wrapped when the job loads it, before any compiled code can run; where it is already loaded, torch
wraps them at once, as before.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gputriage.collectors.after_import import after_import

_DYNAMO = "torch._dynamo"
_unwrapped: list[type[TorchDispatchMode]] = []


class OwnDispatchMode(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """The base of gputriage's dispatch modes: wrapped for Dynamo when the job loads Dynamo, not before.

    `dormant`: taken out in name only (see leave_dispatch_mode); its `__torch_dispatch__` then only calls the op.
    """

    dormant = False
    entered_in_inference = False

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return _DYNAMO in sys.modules  # asked by torch when a subclass is made: wrap it now only if Dynamo is loaded

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)  # type: ignore[no-untyped-call]
        if _DYNAMO not in sys.modules and "__torch_dispatch__" in cls.__dict__:
            _unwrapped.append(cls)
            after_import(_DYNAMO, _wrap_for_dynamo)


def _wrap_for_dynamo() -> None:
    """What torch does when a mode's class is made (TorchDispatchMode.__init_subclass__), done now that Dynamo is
    loaded."""
    while _unwrapped:
        cls = _unwrapped.pop()
        raw = cls.__dict__["__torch_dispatch__"]
        cls.__torch_dispatch__ = torch._disable_dynamo(raw, recursive=True)  # type: ignore[attr-defined,method-assign]


# torch's own operator namespaces (its C++ and its Python registrations): the job's are the others
_TORCH_NAMESPACES = frozenset(
    {
        "aten", "prims", "rngprims", "_c10d_functional", "_c10d_functional_autograd", "_dtensor", "_native",
        "_quantized", "c10d", "debug_mode_ops", "inductor", "mkl", "mkldnn", "mkldnn_prepacked", "onednn", "profiler",
        "quantization", "quantized", "sparse", "symm_mem", "higher_order", "_inductor_test", "streams",
    }
)  # fmt: skip
_KERNEL_KEYS = ("CompositeExplicitAutograd", "CPU", "CUDA")
_AUTOGRAD_KEYS = ("Autograd", "AutogradCPU", "AutogradCUDA", "CompositeImplicitAutograd")


_python_kernel_only: dict[Any, bool] = {}


def python_kernel_without_autograd(func: Any) -> bool:
    """The job's own operator with a Python kernel and no autograd formula (`torch.library.Library("x", "DEF")` with
    `lib.impl(..., "CompositeExplicitAutograd")`, `torch.library.impl("x::op", "cpu")`). Called plainly, its
    kernel's own ops record their gradients; called from a dispatch mode, torch runs it below autograd and gives its
    output the autograd fallback's node, whose backward gives no gradient: the job's optimizer steps did nothing
    while one of our modes was on. Asked once per operator."""
    known = _python_kernel_only.get(func)
    if known is None:
        known = _python_kernel_only[func] = _without_autograd(func)
    return known


def _without_autograd(func: Any) -> bool:
    # an operator's overload only: a mode also sees higher-order operators and others whose `name` is no method, and
    # an error raised here, inside the dispatcher, ends the process (`terminate called ... python_error`)
    if not isinstance(func, torch._ops.OpOverload):
        return False
    try:
        return _python_kernel_only_op(str(func._schema.name))
    except Exception:
        return False


def _python_kernel_only_op(name: str) -> bool:
    if name.partition("::")[0] in _TORCH_NAMESPACES:
        return False
    if any(torch._C._dispatch_has_kernel_for_dispatch_key(name, key) for key in _AUTOGRAD_KEYS):
        return False
    kernels = [line for line in torch._C._dispatch_dump(name).splitlines() if _kernel_line(line)]
    return any(".py:" in line for line in kernels)  # a Python kernel (a C++ one is registered at a .cpp line)


def _kernel_line(line: str) -> bool:
    """`CPU: registered at ...` or `CompositeExplicitAutograd[alias]: registered at ...` of torch's dispatch dump."""
    key = line.partition(":")[0].removesuffix("[alias]")
    return key in _KERNEL_KEYS


@contextlib.contextmanager
def autograd_inside() -> Iterator[None]:
    """Autograd on again for the nested call, as it is when no mode is on: the kernel's ops record their gradients,
    and the fallback keeps the gradient history its output then has."""
    key = torch._C.DispatchKey.AutogradFunctionality
    excluded = torch._C._dispatch_tls_is_dispatch_key_excluded(key)
    torch._C._dispatch_tls_set_dispatch_key_excluded(key, False)
    try:
        yield
    finally:
        torch._C._dispatch_tls_set_dispatch_key_excluded(key, excluded)


def enter_dispatch_mode(mode: TorchDispatchMode) -> bool:
    """Put `mode` on the dispatch mode stack under the modes the user's code has entered (above gputriage's own);
    False where torch refuses it (then the probe it serves is simply off). Under the user's, because a mode's
    `__exit__` pops the top of the stack: pushed on top of a `with FlopCounterMode():` the step runs in, ours was
    what the user's exit took off, and the user's mode stayed on for the rest of the job."""
    above: list[Any] = []
    try:
        for _ in range(torch._C._len_torch_dispatch_stack()):
            top = torch._C._pop_torch_dispatch_stack(None)
            if type(top).__module__.startswith("gputriage."):
                torch._C._push_on_torch_dispatch_stack(top)
                break
            above.append(top)
        mode.__enter__()  # type: ignore[no-untyped-call]  # torch leaves the modes untyped
        if isinstance(mode, OwnDispatchMode):
            mode.entered_in_inference = torch.is_inference_mode_enabled()
    except Exception:
        return False
    finally:
        for other in reversed(above):
            torch._C._push_on_torch_dispatch_stack(other)
    return True


# Modes taken out in name only, until they can be taken off the stack for real (release_deferred)
_deferred: list[OwnDispatchMode] = []


def leave_dispatch_mode(mode: TorchDispatchMode) -> None:
    """Take `mode` off the dispatch mode stack; the modes above it stay, in their order. Its own `__exit__` does the
    popping, so torch's module-level "a mode is on" flags are restored as usual.

    Not inside an `inference_mode` block the mode was entered outside of: the block's exit restores the dispatch keys
    it found, the Python key among them, onto an empty mode stack, and the job's next factory call (`torch.randn`)
    died of torch's INTERNAL ASSERT "Hit Python dispatch key but no arguments had PyInterpreter" (trial 10: a step
    boundary inside an evaluation loop's `with torch.inference_mode():` took out a mode entered before the block).
    There the mode only goes dormant, and comes off at the next call of release_deferred outside the block."""
    if isinstance(mode, OwnDispatchMode) and torch.is_inference_mode_enabled() and not mode.entered_in_inference:
        mode.dormant = True
        if mode not in _deferred:
            _deferred.append(mode)
        return
    _pop(mode)


def release_deferred() -> None:
    """Take off the stack the dormant modes that can come off now (outside any inference_mode block)."""
    if not _deferred or torch.is_inference_mode_enabled():
        return
    while _deferred:
        _pop(_deferred.pop())


def _pop(mode: TorchDispatchMode) -> None:
    above: list[Any] = []
    try:
        for _ in range(torch._C._len_torch_dispatch_stack()):
            top = torch._C._pop_torch_dispatch_stack(None)
            if top is mode:
                break
            above.append(top)
        else:
            return  # not on the stack (the user's code took it off): nothing to do
        torch._C._push_on_torch_dispatch_stack(mode)  # back on top for its own __exit__, which pops the top
        mode.__exit__(None, None, None)
    finally:
        for other in reversed(above):
            torch._C._push_on_torch_dispatch_stack(other)


# What an op says when a dispatch mode hands it a Python number where its schema has a Tensor
_NUMBER_FOR_TENSOR = "Expected a value of type 'Tensor'"
_WRAPPED_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}


def call_op(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`func(*args, **kwargs)` from inside a dispatch mode. TorchScript's wrapped numbers (the constants of a traced
    graph: the 2 of `x * 2`) reach a mode as Python numbers, which the op then refuses (`aten::equal() Expected a
    value of type 'Tensor' ... found type 'int'`): a traced model failed when called during the probe window, where
    plain Python runs it. They are passed again as the 0-d tensors they were; any other error is the op's own."""
    if python_kernel_without_autograd(func):
        with autograd_inside():
            return func(*args, **kwargs)
    try:
        return func(*args, **kwargs)
    except RuntimeError as exc:
        if _NUMBER_FOR_TENSOR not in str(exc):
            raise
        fixed = _numbers_as_tensors(func, args)
        if fixed is None:
            raise
    return func(*fixed, **kwargs)


def _numbers_as_tensors(func: Any, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """`args` with each Python number that the schema wants as a Tensor made one; None when there is none."""
    schema = getattr(func, "_schema", None)
    if schema is None:
        return None
    out = list(args)
    changed = False
    for index, (value, argument) in enumerate(zip(args, schema.arguments, strict=False)):
        dtype = _WRAPPED_DTYPES.get(type(value))
        if dtype is not None and isinstance(argument.type, torch._C.TensorType):
            out[index] = torch.tensor(value, dtype=dtype)
            changed = True
    return tuple(out) if changed else None
