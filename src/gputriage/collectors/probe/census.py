"""Rung 4's op census: a dispatch mode, on for the probe window only, that counts ops and host time per device.

It sees every aten op after autograd (forward, backward and optimizer), on the thread that runs the step and on the
autograd engine's threads, which inherit the mode. Ops whose tensors are all 0-d CPU scalars are counted apart:
optimizers keep their step counters on the CPU on purpose.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gputriage.collectors.patching import hide_own_frames
from gputriage.collectors.probe.state import ProbeState, capturing
from gputriage.collectors.probe.syncs import SyncRecorder
from gputriage.collectors.usercode import frame_where, user_frame
from gputriage.record.compute import ComputeSection, OpStat

aten = torch.ops.aten
_SCALAR_READS = {aten._local_scalar_dense.default}
# Ops whose output size depends on the data: on CUDA they wait for the device to know how much to allocate.
_DATA_DEPENDENT = {aten.nonzero.default, aten.masked_select.default, aten._unique2.default, aten.unique_dim.default}
TOP_CPU_OPS = 12


class OpCensus(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """The dispatch mode of the census window. It tells torch.compile to switch it off while compiling and for the
    compiled code (`ignore_compile_internals`): without that, torch.compile refuses to compile under a user's dispatch
    mode (and `fullgraph=True` fails), which would change the job. The census then counts the ops that run eagerly."""

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True

    def __init__(self, state: ProbeState, syncs: SyncRecorder) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._state = state
        self._syncs = syncs
        self.ops: dict[tuple[str, str], OpStat] = {}
        self.scalar_cpu_ops = 0

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if self._state.in_child or self._state.in_loader or capturing():
            # collation inside DataLoader.__next__ is the input pipeline's time (rung 5), not the step's compute
            try:
                return func(*args, **kwargs)
            except BaseException as exc:
                hide_own_frames(exc)
                raise
        start_s = time.perf_counter()
        try:
            out = func(*args, **kwargs)
        except BaseException as exc:
            hide_own_frames(exc)
            raise  # a bare raise adds no frame of ours back
        finally:
            elapsed_s = time.perf_counter() - start_s
            with contextlib.suppress(Exception):  # the census must never break the user's op
                self._count(func, args, kwargs, elapsed_s)
        return out

    def _count(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], elapsed_s: float) -> None:
        tensors = [a for a in _flat(args) if isinstance(a, torch.Tensor)]
        tensors += [v for v in kwargs.values() if isinstance(v, torch.Tensor)]
        device = _op_device(tensors, kwargs)
        if not self._state.in_sync_call:
            kind = _sync_kind(func, tensors, kwargs)
            if kind is not None:
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
        stat.count += 1
        stat.time_s += elapsed_s

    def fill(self, section: ComputeSection) -> None:
        for stat in self.ops.values():
            section.ops_per_device[stat.device] = section.ops_per_device.get(stat.device, 0) + stat.count
            section.op_time_s_per_device[stat.device] = section.op_time_s_per_device.get(stat.device, 0.0) + stat.time_s
        section.scalar_cpu_ops = self.scalar_cpu_ops
        cpu = sorted((s for s in self.ops.values() if s.device == "cpu"), key=lambda s: -s.time_s)
        section.top_cpu_ops = cpu[:TOP_CPU_OPS]


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


def _sync_kind(func: Any, tensors: list[torch.Tensor], kwargs: dict[str, Any]) -> str | None:
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
    elif func is aten._to_copy.default and isinstance(target, torch.device) and target.type == "cpu":
        kind = "to-cpu"
    return kind
