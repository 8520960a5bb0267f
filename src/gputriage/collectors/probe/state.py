"""State shared by the probes of one observed process."""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import torch
from torch.compiler import is_compiling

from gputriage.collectors.probe.clock import PhaseClock

_tracing_state = torch._C._get_tracing_state


def capturing() -> bool:
    """A graph is being captured (torch.compile / torch.export, torch.jit.trace): the probes step aside, and leave no
    trace in it. `is_compiling()` first: it is a constant while dynamo traces, so the rest is never traced."""
    return is_compiling() or _tracing_state() is not None


def in_backward() -> bool:
    """Inside autograd's backward pass. torch's C++ derivative formulas make some tensors from an operand's options;
    on the preflight's stand-in those read its C++ device, "cpu", so they are the stand-in's own values, not the
    user's CPU tensors. On a real GPU they are on the GPU. A real placement mistake has already shown in the forward
    pass, which the backward only follows."""
    return bool(torch._C._current_graph_task_id() != -1)


# The operands of the torch calls the job is inside, per thread, as the preflight's mode sees them: a C++ composite
# such as F.one_hot or ctc_loss makes helper tensors from its operand's C++ options, which on the stand-in are the
# backing's ("cpu"); on a GPU they are on the GPU. A host tensor the caller did not pass in is such a helper. Where no
# call is pushed (a run on a real device), every host tensor counts as the caller's.
_CALLS = threading.local()


@contextlib.contextmanager
def torch_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[None]:
    stack = _CALLS.__dict__.setdefault("stack", [])
    stack.append((args, kwargs))
    try:
        yield
    finally:
        stack.pop()


def given_by_caller(foreign: torch.Tensor) -> bool:
    """Whether a host tensor met inside the innermost torch call can be the caller's: the caller passed a host
    tensor (not a 0-d scalar) to that call, which the C++ side may have turned into this one (SDPA's math path makes
    a float mask from a boolean one); True where no call is known (an op dispatched from C++ alone). A call whose
    operands are all on the device makes its own helpers (F.one_hot's arange), which a GPU makes on the GPU."""
    stack = _CALLS.__dict__.get("stack")
    if not stack:
        return True
    args, kwargs = stack[-1]
    return any(
        value is foreign or (isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dim() > 0)
        for value in torch.utils._pytree.tree_leaves((args, kwargs))
    )


_PLAIN_TORCH_FUNCTION = torch.Tensor.__torch_function__.__func__  # type: ignore[attr-defined]


def own_reads() -> contextlib.AbstractContextManager[Any]:
    """Around gputriage's own reads of a user's tensor (`.device`, `.shape`, `.is_cpu`): a Tensor subclass's
    `__torch_function__` sees none of them. A subclass that refuses what it does not know (the "Extending torch"
    pattern) died at its first `.item()` on our `__get__` of `.is_cpu`, and one that counts its calls counted ours.
    A user's TorchFunctionMode sees none of them either (it saw our `numel`, `untyped_storage` and `__get__`)."""
    return torch._C.DisableTorchFunction()


def is_plain(t: torch.Tensor) -> bool:
    """torch.Tensor's own __torch_function__ (plain tensors, Parameters' disabled one aside) and no TorchFunctionMode
    of the user's on: reads go straight."""
    return (
        getattr(type(t).__torch_function__, "__func__", None) is _PLAIN_TORCH_FUNCTION
        and not torch._C._is_torch_function_mode_enabled()
    )


def device_type_of(t: torch.Tensor) -> str:
    if is_plain(t):
        return t.device.type
    with own_reads():
        return t.device.type


def is_cpu_of(t: torch.Tensor) -> bool:
    """`t.is_cpu`, read as device_type_of reads the device: the cheap test the `.item()` wrapper makes first."""
    if is_plain(t):
        return t.is_cpu
    with own_reads():
        return t.is_cpu


_HOST_OPERAND: list[tuple[list[weakref.ref[torch.Tensor]], list[int], int | None]] = []


def note_host_operand(t: torch.Tensor) -> None:
    """The host tensor of an op refused for mixing devices (by CUDA, seen by the census, or by the preflight's
    stand-in), held weakly with the tensor it is a view of (`self.weight.T` is gone once the op has raised; the
    parameter is not): the crash's explanation says whose tensor it is, and nothing of the job's is kept."""
    with contextlib.suppress(TypeError):
        base = t._base
        tensors = [t, base] if isinstance(base, torch.Tensor) else [t]
        _HOST_OPERAND[:] = [([weakref.ref(x) for x in tensors], list(t.shape), storage_address(t))]


def storage_address(t: torch.Tensor) -> int | None:
    """Where a CPU tensor's storage lies (an int: nothing of the tensor is kept): `rewards.detach()`, a temporary gone
    once the op has raised, shares it with `rewards`, the variable the script made. None off the CPU, or empty."""
    try:
        if t.device.type != "cpu":
            return None
        address = int(t.untyped_storage().data_ptr())
    except Exception:
        return None
    return address or None


def host_operand() -> tuple[list[torch.Tensor], list[int], int | None] | None:
    """The tensors note_host_operand saw last that are still alive (the operand, the tensor it is a view of), the
    operand's shape, and its storage's address (for a temporary no longer alive)."""
    if not _HOST_OPERAND:
        return None
    refs, shape, address = _HOST_OPERAND[0]
    alive = [x for x in (ref() for ref in refs) if x is not None]
    return (alive, shape, address) if alive or address is not None else None


class ProbeState(msgspec.Struct):
    expected_device: str  # device type: cuda | mps | xpu | meta | cpu
    clock: PhaseClock = msgspec.field(default_factory=PhaseClock)
    owner_pid: int = msgspec.field(default_factory=os.getpid)
    owner_thread: int = msgspec.field(default_factory=threading.get_ident)  # the thread that runs the training loop
    in_loader: int = 0  # > 0 while DataLoader.__next__ runs (its modules are transforms, not the model)
    in_loss: int = 0  # > 0 inside a loss module's call while placement watches (its F.* call is the same loss)
    in_sync_call: int = 0  # > 0 inside a Python-level sync wrapper, so the dispatch census does not count it twice
    step: int = 0  # index of the step that is running now
    # Inside torch.autograd.backward of a loss on a device (not the CPU): the derivative formulas' helper tensors are
    # then the device's on a GPU, whatever a stand-in's C++ options say (census.py)
    backward_on_device: bool = False
    # On a stand-in device: whether an op the census would count as a host sync really reads the device's values on
    # the host (the stand-in's C++ side calls itself "cpu", so torch's own casts look like copies to the host)
    stand_in_host_read: Callable[[Any, list[Any]], bool] | None = None

    @property
    def stand_in_clock(self) -> Callable[[], float] | None:
        """On a stand-in device: reads the host seconds its ops have cost so far (Step.stand_in_s); None otherwise.
        Kept by the phase clock, which reads it at each phase change (Step.stand_in_phases_s): one clock, set once."""
        return self.clock.stand_in

    @stand_in_clock.setter
    def stand_in_clock(self, read: Callable[[], float] | None) -> None:
        self.clock.stand_in = read

    @property
    def in_child(self) -> bool:
        """True in a forked DataLoader worker: the probes there must do nothing."""
        return os.getpid() != self.owner_pid
