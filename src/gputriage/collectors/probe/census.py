"""Rung 4's op census: a dispatch mode, on for the probe window only, that counts ops and host time per device.

It sees every aten op after autograd (forward, backward and optimizer), on the thread that runs the step and on the
autograd engine's threads, which inherit the mode. Ops whose tensors are all 0-d CPU scalars are counted apart:
optimizers keep their step counters on the CPU on purpose.

It also looks at the tensors themselves (`MixedDevices`): an op that meets a CPU tensor next to tensors on the
expected device fails on CUDA ("Expected all tensors to be on the same device"), although the meta stand-in accepts
some of them (an embedding with CPU indices). Tensors made on the CPU inside a forward are remembered with their line,
so the finding names where the stray tensor was made, not only where it was used.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any

import torch

from gputriage.collectors.identity import IdentityMap
from gputriage.collectors.patching import hide_own_frames
from gputriage.collectors.probe.modes import OwnDispatchMode, call_op
from gputriage.collectors.probe.state import (
    ProbeState,
    capturing,
    given_by_caller,
    in_backward,
    note_host_operand,
    own_reads,
)
from gputriage.collectors.probe.syncs import SyncRecorder
from gputriage.collectors.usercode import frame_where, user_frame
from gputriage.record.compute import ComputeSection, MixedDeviceOp, OpStat

aten = torch.ops.aten
_SCALAR_READS = {aten._local_scalar_dense.default}
# Ops whose output size depends on the data: on CUDA they wait for the device to know how much to allocate.
_DATA_DEPENDENT = {aten.nonzero.default, aten.masked_select.default, aten._unique2.default, aten.unique_dim.default}
# Indexing with a boolean mask: its output size depends on the mask's values, so CUDA syncs to count them.
_MASK_INDEXING = {aten.index.Tensor, aten.index_put_.default, aten.index_put.default}
_MASK_DTYPES = (torch.bool, torch.uint8)
TOP_CPU_OPS = 12


class OpCensus(OwnDispatchMode):
    """The dispatch mode of the census window. It tells torch.compile to switch it off while compiling and for the
    compiled code (`ignore_compile_internals`): without that, torch.compile refuses to compile under a user's dispatch
    mode (and `fullgraph=True` fails), which would change the job. The census then counts the ops that run eagerly."""

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True

    def __init__(self, state: ProbeState, syncs: SyncRecorder, mixed: MixedDevices | None = None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._state = state
        self._syncs = syncs
        self.ops: dict[tuple[str, str], OpStat] = {}
        self.scalar_cpu_ops = 0
        self.mixed = mixed if mixed is not None else MixedDevices(state)
        self.conv_calls = 0
        self.conv_shapes: set[tuple[int, ...]] = set()

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if self.dormant:
            return call_op(func, args, kwargs)
        if self._state.in_child or self._state.in_loader or capturing():
            # collation inside DataLoader.__next__ is the input pipeline's time (rung 5), not the step's compute
            try:
                return call_op(func, args, kwargs)
            except BaseException as exc:
                hide_own_frames(exc, passed_on=True)
                raise
        start_s, start_cpu_s = time.perf_counter(), time.thread_time()
        try:
            out = call_op(func, args, kwargs)
        except BaseException as exc:
            out = None
            hide_own_frames(exc, passed_on=True)
            raise  # a bare raise adds no frame of ours back
        finally:
            elapsed_s = time.perf_counter() - start_s
            thread_cpu_s = time.thread_time() - start_cpu_s
            with contextlib.suppress(Exception), own_reads():  # never break the user's op, nor show it our reads
                self._count(func, args, kwargs, elapsed_s, out, thread_cpu_s=thread_cpu_s)
        return out

    def _count(
        self,
        func: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        elapsed_s: float,
        out: Any,
        *,
        thread_cpu_s: float | None = None,
    ) -> None:
        tensors = [a for a in _flat(args) if isinstance(a, torch.Tensor)]
        tensors += [v for v in kwargs.values() if isinstance(v, torch.Tensor)]
        device = _op_device(tensors, kwargs)
        state = self._state
        if device == "cpu" and state.backward_on_device and state.stand_in_host_read is not None and in_backward():
            # a derivative formula's helper made from the stand-in gradient's C++ options ("cpu"): affine_grid's
            # backward builds its base grid so. On a GPU it is made on the GPU, and so are the ops on it.
            device = "cuda"
        self.mixed.see(func, tensors, out)
        if not self._state.in_sync_call:
            kind = _sync_kind(func, args, tensors, kwargs)
            host_read = self._state.stand_in_host_read
            if kind is not None and (host_read is None or host_read(func, tensors)):
                self._syncs.record(kind, kind_device(tensors), elapsed_s, skip_frames=0)
        if device == "cpu" and all(t.dim() == 0 for t in tensors):
            self.scalar_cpu_ops += 1
            return
        name = str(func.overloadpacket).replace("aten::", "aten.")
        key = (name, device)
        stat = self.ops.get(key)
        if stat is None:
            where = frame_where(user_frame(sys._getframe(1))) if device == "cpu" else None
            stat = self.ops[key] = OpStat(name=name, device=device, where=where)
        if device == "cpu" and thread_cpu_s is not None:
            # A CPU op costs the step what its thread computed: on a loaded machine the OS takes the core away
            # mid-op (a 0.1 ms cat of two batches took 11 ms on every call), and the wall clock counts that wait.
            # The op's threads share its work, so its calling thread's CPU time is its wall time when nothing
            # else wants the core.
            elapsed_s = min(elapsed_s, thread_cpu_s)
        stat.count += 1
        stat.time_s += elapsed_s
        stat.max_s = max(stat.max_s, elapsed_s)
        if name in _CONVOLUTIONS and device != "cpu" and tensors:
            self.conv_calls += 1
            if len(self.conv_shapes) < MAX_CONV_SHAPES:
                self.conv_shapes.add(tuple(tensors[0].shape))

    def fill(self, section: ComputeSection) -> None:
        for stat in self.ops.values():
            section.ops_per_device[stat.device] = section.ops_per_device.get(stat.device, 0) + stat.count
            section.op_time_s_per_device[stat.device] = section.op_time_s_per_device.get(stat.device, 0.0) + stat.time_s
        section.scalar_cpu_ops = self.scalar_cpu_ops
        cpu = sorted((s for s in self.ops.values() if s.device == "cpu"), key=lambda s: -s.steady_s())
        section.top_cpu_ops = cpu[:TOP_CPU_OPS]
        section.cpu_op_steady_s = sum(s.steady_s() for s in cpu)
        section.mixed_device_ops = self.mixed.found()
        section.conv_calls, section.conv_input_shapes = self.conv_calls, len(self.conv_shapes)


# Ops that take CPU operands next to device tensors by design: indices of an index op (copied, not a crash), the
# lengths of pack_padded_sequence, and the explicit moves themselves.
_CPU_OPERAND_OK = {
    "aten.index",
    "aten.index_put",
    "aten.index_put_",
    "aten._index_put_impl_",
    "aten._pack_padded_sequence",
    "aten.copy_",
    "aten._to_copy",
    "aten.to",
    "aten.lift_fresh",
    "aten.set_",
}
MAX_MIXED_OPS = 8
# The convolutions cuDNN runs (its autotuner and determinism settings apply to them), and the input shapes kept.
_CONVOLUTIONS = {"aten.convolution", "aten._convolution", "aten.cudnn_convolution", "aten.convolution_overrideable"}
MAX_CONV_SHAPES = 256
# torch.tensor([...]) reaches dispatch as lift_fresh of a tensor built outside it.
_FACTORIES_FROM_DATA = {"aten.lift_fresh", "aten.lift_fresh_copy"}


class MixedDevices:
    """CPU tensors (not 0-d scalars) that meet tensors on the expected device in one op, and where they were made."""

    def __init__(self, state: ProbeState) -> None:
        self._state = state
        self._made: IdentityMap[torch.Tensor, str] = IdentityMap()  # CPU tensor made inside a forward -> its line
        self._ops: dict[tuple[str, str | None], MixedDeviceOp] = {}
        self._frames_up = 3

    def ignored(self) -> bool:
        """In a DataLoader worker or inside DataLoader.__next__ (collation is not the model's work)."""
        return self._state.in_child or self._state.in_loader > 0

    def see(self, func: Any, tensors: list[torch.Tensor], out: Any, frames_up: int = 3) -> None:
        """`frames_up`: frames from here to the dispatch mode's `__torch_dispatch__` (where the user's frame search
        starts)."""
        self._frames_up = frames_up
        expected = self._state.expected_device
        if expected == "cpu":
            return
        name = str(func.overloadpacket).replace("aten::", "aten.")
        devices = {t.device.type for t in tensors}
        cpu = [t for t in tensors if t.device.type == "cpu" and t.dim() > 0]
        if expected in devices:
            cpu = [t for t in cpu if given_by_caller(t)]  # not a composite's own helper (see given_by_caller)
            if cpu and name not in _CPU_OPERAND_OK and not in_backward():
                self._mixed(name, expected, cpu)
            return
        if devices - {"cpu"} or self._state.clock.phase != "forward":
            return
        # Inside a forward, on the CPU only: a factory (arange, ones, tensor(...)) makes a stray tensor; an op on one
        # (triu, eq, expand) passes its origin on.
        origin = self._origin(cpu)
        if origin is not None or not tensors or name in _FACTORIES_FROM_DATA:
            self._remember(out, origin)

    def _origin(self, cpu: list[torch.Tensor]) -> str | None:
        """The line that made one of these CPU operands inside a forward, or this line (a factory's first result)."""
        for t in cpu:
            site = self._made.get(t)
            if site is None and isinstance(t._base, torch.Tensor):
                # a view taken after the forward (`output[1:].view(-1, dim)` of a forward's CPU result): its base
                # was made there (trial 10's seq2seq: `outputs = torch.zeros(...)` in forward, a crash in the loss)
                site = self._made.get(t._base)
            if site is not None:
                return site
        return None

    def _remember(self, out: Any, origin: str | None) -> None:
        results = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, torch.Tensor)]
        for t in results:
            if t.device.type == "cpu" and t.dim() > 0:
                self._made[t] = origin or frame_where(user_frame(sys._getframe(self._frames_up))) or "?"

    def _mixed(self, name: str, device: str, cpu: list[torch.Tensor]) -> None:
        note_host_operand(cpu[0])  # on a GPU, the op that raises is the last one seen mixing devices
        where = frame_where(user_frame(sys._getframe(self._frames_up)))
        key = (name, where)
        op = self._ops.get(key)
        if op is None:
            if len(self._ops) >= MAX_MIXED_OPS:
                return
            origin = self._origin(cpu)
            op = self._ops[key] = MixedDeviceOp(name, device, list(cpu[0].shape), 0, where, origin)
        op.count += 1

    def found(self) -> list[MixedDeviceOp]:
        return list(self._ops.values())


# The ops step 0's mode sees before it is taken out though the step has not ended (see MixedDeviceMode.spent): a
# GPT-2 small's first training step (forward, backward, optimizer) is a few thousand; the census's steps 1-3 see
# mixed devices again, whatever step 0 held.
MAX_WARMUP_OPS = 20_000


class MixedDeviceMode(OwnDispatchMode):
    """Only the tensors' look (MixedDevices), for the warm-up step, where the op census is off. Switched off under
    torch.compile and graph capture, and invisible in tracebacks, as the census is."""

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True

    def __init__(self, mixed: MixedDevices) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._mixed = mixed
        self.ops = 0

    @property
    def spent(self) -> bool:
        """Seen MAX_WARMUP_OPS ops without the step ending: a job with no step boundaries (an inference or generation
        loop, an export) would keep a Python dispatch mode on every op of its whole run (3.3x slower in a trial); the
        probe takes it out at the next module call. A training step's own ops are far fewer."""
        return self.ops >= MAX_WARMUP_OPS

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if self.dormant:
            return call_op(func, args, kwargs)
        self.ops += 1
        try:
            out = call_op(func, args, kwargs)
        except BaseException as exc:
            # the op that fails is the one to see: CUDA's (or the preflight's stand-in's) device check raised there
            self._see(func, args, kwargs, None)
            hide_own_frames(exc, passed_on=True)
            raise
        self._see(func, args, kwargs, out)
        return out

    def _see(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        with contextlib.suppress(Exception), own_reads():  # never break the user's op, nor show it our reads
            if not self._mixed.ignored() and not capturing():
                tensors = [a for a in _flat(args) if isinstance(a, torch.Tensor)]
                tensors += [v for v in kwargs.values() if isinstance(v, torch.Tensor)]
                self._mixed.see(func, tensors, out, frames_up=3)


def _flat(args: tuple[Any, ...]) -> list[Any]:
    out: list[Any] = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out.extend(a)
        else:
            out.append(a)
    return out


def _op_device(tensors: list[torch.Tensor], kwargs: dict[str, Any]) -> str:
    """The device an op runs on: any non-CPU tensor decides (a CPU scalar may ride along with cuda tensors)."""
    kinds = {t.device.type for t in tensors}
    kinds.discard("cpu")
    if kinds:
        return sorted(kinds)[0]
    target = kwargs.get("device")
    if isinstance(target, torch.device):
        return target.type
    return "cpu"


def kind_device(tensors: list[torch.Tensor]) -> str:
    kinds = {t.device.type for t in tensors} - {"cpu"}
    return sorted(kinds)[0] if kinds else "cpu"


def _fills_a_mask(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """`x[mask] = 0.0`: ATen's index_put_ hands a single mask on the tensor's device with a one-element host value to
    masked_fill_ (canDispatchToMaskedFill), which never counts the mask, so no sync. On CUDA a Python scalar becomes
    a CPU tensor for this; under a stand-in it may be made on the stand-in device, as a 0-d tensor."""
    if func is aten.index.Tensor or len(args) < 3:
        return False
    accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
    self_tensor, indices, value = args[0], args[1], args[2]
    if accumulate or not isinstance(value, torch.Tensor) or value.numel() != 1:
        return False
    if value.device.type != "cpu" and value.dim() != 0:
        return False
    defined = [i for i in indices if isinstance(i, torch.Tensor)]
    return len(defined) == 1 and defined[0].dtype in _MASK_DTYPES and defined[0].device == self_tensor.device


def _host_index(t: torch.Tensor) -> bool:
    """An integer index tensor in host memory (not a 0-d scalar, which rides along as a number)."""
    return t.device.type == "cpu" and t.dim() > 0 and not t.is_floating_point() and t.dtype not in _MASK_DTYPES


def _sync_kind(func: Any, args: tuple[Any, ...], tensors: list[torch.Tensor], kwargs: dict[str, Any]) -> str | None:
    """The kind of host sync this op is, or None. Only ops that read a device tensor on the host qualify."""
    if func is aten.copy_.default:
        # copy_(dst, src): a host destination filled from a device source
        to_host = len(tensors) >= 2 and tensors[0].device.type == "cpu" and tensors[1].device.type != "cpu"
        return "to-cpu" if to_host else None
    source = tensors[0].device.type if tensors else "cpu"
    target = kwargs.get("device")
    kind = None
    if source == "cpu":
        kind = None
    elif func in _SCALAR_READS:
        kind = "scalar"
    elif func in _DATA_DEPENDENT and source == "cuda":
        kind = "nonzero"
    elif func in _MASK_INDEXING and source == "cuda" and any(t.dtype in _MASK_DTYPES for t in tensors[1:]):
        # x[mask], x[mask] = v: CUDA turns the boolean mask into indices on the host first
        kind = None if _fills_a_mask(func, args, kwargs) else "nonzero"
    elif func in _MASK_INDEXING and source in ("cuda", "meta") and any(_host_index(t) for t in tensors[1:]):
        # x[idx] with idx on the CPU: CUDA copies idx to the device from pageable memory, and such a copy first
        # waits for the stream (CUDA's API sync behaviour), every time; meta stands in for CUDA here
        kind = "cpu-index"
    elif func is aten._to_copy.default and isinstance(target, torch.device) and target.type == "cpu":
        kind = "to-cpu"
    return kind
