"""The collected columns, classified once: GPU kinds, main thread, steps, name classes, code locations."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

from gputriage.tracing.collect import (
    ANNOTATION,
    COMM,
    COMPUTE,
    CPU_OP,
    MEMORY,
    PYTHON,
    Collected,
    Table,
    gpu_kind,
    user_frame,
)
from gputriage.tracing.intervals import Spans, union

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

# The DataLoader annotations that the TensorBoard plugin counted as data loading.
DATALOADER_RE = re.compile(r"^enumerate\(DataLoader\)#.*__next__|^enumerate\(DataPipe\)#|DataLoader.*__next__")
SYNC_CALL_RE = re.compile(r"^(cuda|hip)(StreamSynchronize|DeviceSynchronize|EventSynchronize|Memcpy)$")
SYNC_OP_RE = re.compile(r"^aten::(item|_local_scalar_dense|nonzero|equal|is_nonzero)$")
LAUNCH_RE = re.compile(r"(Launch|launch)")
GRAPH_LAUNCH_RE = re.compile(r"^(cuda|hip)GraphLaunch")
ALLOC_RE = re.compile(r"^(cuda|hip)(Malloc|Free|HostAlloc|MallocHost|FreeHost|HostRegister)")
OPTIMIZER_RE = re.compile(r"^Optimizer\.(step|zero_grad)#")
COMPILED_RE = re.compile(r"Torch-Compiled Region|CompiledFunction|CompiledFxGraph|torch_compile")
STEP_RE = re.compile(r"^ProfilerStep#")


def _name_mask(names: list[str], ids: I64, pattern: re.Pattern[str]) -> Mask:
    hits = np.fromiter((pattern.search(n) is not None for n in names), dtype=bool, count=len(names))
    return hits[ids] if len(names) else np.zeros(len(ids), dtype=bool)


@dataclass
class Prepared:
    col: Collected
    _lane_cache: dict[int, tuple[I64, I64, I64]] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return self.col.names

    # ---- GPU side
    @cached_property
    def gpu_kind(self) -> npt.NDArray[np.int8]:
        kinds = np.fromiter((gpu_kind(n) for n in self.names), dtype=np.int8, count=len(self.names))
        out: npt.NDArray[np.int8] = kinds[self.col.gpu.name] if len(self.names) else np.zeros(0, np.int8)
        return out

    @cached_property
    def busy(self) -> Spans:
        return union(self.col.gpu.ts, self.col.gpu.end)

    @cached_property
    def compute(self) -> Spans:
        g = self.col.gpu
        keep = self.gpu_kind == COMPUTE
        return union(g.ts[keep], g.end[keep])

    @cached_property
    def comm(self) -> Spans:
        g = self.col.gpu
        keep = self.gpu_kind == COMM
        return union(g.ts[keep], g.end[keep])

    @property
    def kernels(self) -> Table:
        """Compute and communication kernels (a fresh copy on each use: not kept, it is as long as the trace)."""
        return self.col.gpu.take(self.gpu_kind != MEMORY)

    def gpu_named(self, pattern: re.Pattern[str]) -> Table:
        return self.col.gpu.take(_name_mask(self.names, self.col.gpu.name, pattern))

    @property
    def window(self) -> tuple[int, int] | None:
        if not len(self.busy):
            return None
        return int(self.busy.start[0]), int(self.busy.end[-1])

    # ---- CPU side
    @cached_property
    def main_thread(self) -> int | None:
        """The thread that runs the training loop.

        The one with ProfilerStep spans, else the one that iterates the DataLoader, else the process's main thread
        (tid == pid; autograd's backward thread often launches more kernels), else the busiest launcher.
        """
        cpu = self.col.cpu
        for pattern in (STEP_RE, DATALOADER_RE):
            lanes = cpu.lane[_name_mask(self.names, cpu.name, pattern)]
            if len(lanes):
                return int(np.bincount(lanes).argmax())
        main_like = [i for i, (pid, tid) in enumerate(self.col.threads) if pid == tid or str(pid) == str(tid)]
        with_ops = [i for i in main_like if np.any(cpu.lane == i)]
        if with_ops:
            return with_ops[0]
        for lanes in (self.col.runtime.lane, cpu.lane):
            if len(lanes):
                return int(np.bincount(lanes).argmax())
        return None

    @cached_property
    def steps(self) -> Spans:
        """ProfilerStep spans on the main thread, in time order."""
        cpu = self.col.cpu
        keep = _name_mask(self.names, cpu.name, STEP_RE) & (cpu.lane == (self.main_thread or 0))
        order = np.argsort(cpu.ts[keep], kind="stable")
        return Spans(cpu.ts[keep][order], cpu.end[keep][order])

    def cpu_named(self, pattern: re.Pattern[str], *, main_only: bool = False) -> Table:
        cpu = self.col.cpu
        keep = _name_mask(self.names, cpu.name, pattern) & (cpu.extra != PYTHON)
        if main_only:
            keep &= cpu.lane == (self.main_thread or 0)
        return cpu.take(keep)

    def runtime_named(self, pattern: re.Pattern[str]) -> Table:
        return self.col.runtime.take(_name_mask(self.names, self.col.runtime.name, pattern))

    @cached_property
    def dataloader(self) -> Spans:
        t = self.cpu_named(DATALOADER_RE, main_only=True)
        return union(t.ts, t.end)

    @cached_property
    def sync_calls(self) -> Table:
        return self.runtime_named(SYNC_CALL_RE)

    @cached_property
    def launch_durations_ns(self) -> I64:
        """The duration of every kernel-launch call (cudaLaunchKernel, hipLaunchKernel, ...); not the whole rows."""
        rt = self.col.runtime
        mask = _name_mask(self.names, rt.name, LAUNCH_RE)
        durations: I64 = rt.end[mask] - rt.ts[mask]
        return durations

    @cached_property
    def graph_launches(self) -> Table:
        return self.runtime_named(GRAPH_LAUNCH_RE)

    @property
    def cpu_ops(self) -> Table:
        """ATen ops (a fresh copy on each use: not kept, it is as long as the trace)."""
        return self.col.cpu.take(self.col.cpu.extra == CPU_OP)

    @cached_property
    def cpu_op_count(self) -> int:
        return int((self.col.cpu.extra == CPU_OP).sum())

    @cached_property
    def annotations(self) -> Table:
        return self.col.cpu.take(self.col.cpu.extra == ANNOTATION)

    @cached_property
    def python_frames(self) -> Table:
        return self.col.cpu.take(self.col.cpu.extra == PYTHON)

    def runtime_ts_for(self, corr: I64) -> npt.NDArray[np.float64]:
        """The start of the runtime call with the same correlation id, NaN when there is none."""
        rt = self.col.runtime
        out = np.full(len(corr), np.nan)
        if not len(rt) or not len(corr):
            return out
        order = np.argsort(rt.corr, kind="stable")
        keys = rt.corr[order]
        pos = np.clip(np.searchsorted(keys, corr), 0, len(keys) - 1)
        found = (keys[pos] == corr) & (corr >= 0)
        out[found] = rt.ts[order][pos[found]]
        return out

    @cached_property
    def user_frames(self) -> tuple[Table, list[str | None]]:
        """Only the python_function events that are the user's code, with their 'file:line'."""
        located = [user_frame(n) for n in self.names]
        mask = np.fromiter((w is not None for w in located), dtype=bool, count=len(located))
        py = self.python_frames
        return py.take(mask[py.name] if located else np.zeros(len(py), dtype=bool)), located

    def where_at(self, lane: int, ts: int, end: int) -> str | None:
        """The innermost user-code frame around [ts, end] on a thread (python_function events or 'Call stack')."""
        frames, located = self.user_frames
        if len(frames):
            enclosing = np.flatnonzero((frames.lane == lane) & (frames.ts <= ts) & (frames.end >= end))
            if len(enclosing):
                return located[int(frames.name[enclosing[np.argmax(frames.ts[enclosing])]])]
        return self._where_from_call_stack(lane, ts, end)

    def _where_from_call_stack(self, lane: int, ts: int, end: int) -> str | None:
        stacks = self.col.call_stacks
        if not stacks:
            return None
        cpu = self.col.cpu
        rows = np.fromiter(stacks.keys(), dtype=np.int64, count=len(stacks))
        hit = rows[(cpu.lane[rows] == lane) & (cpu.ts[rows] <= ts) & (cpu.end[rows] >= end)]
        for row in hit[np.argsort(-cpu.ts[hit], kind="stable")]:
            for frame in stacks[int(row)].split(";"):
                found = user_frame(frame.strip())
                if found is not None:
                    return found
        return None

    def _ops_on(self, lane: int) -> tuple[I64, I64, I64]:
        """CPU ops of one thread sorted by start (ts, end, name); built on first use, for queried threads only."""
        found = self._lane_cache.get(lane)
        if found is None:
            ops = self.cpu_ops
            rows = np.flatnonzero(ops.lane == lane)
            rows = rows[np.argsort(ops.ts[rows], kind="stable")]
            found = self._lane_cache[lane] = (ops.ts[rows], ops.end[rows], ops.name[rows])
        return found

    def enclosing_op(self, lane: int, ts: int, end: int) -> str | None:
        """The innermost CPU op around [ts, end] on a thread (e.g. aten::item around a cudaStreamSynchronize).

        Ops on one thread nest, so walking back from the last op that starts before `ts`, the first one that also
        ends after `end` is the innermost; the walk is bounded, since an op's children sit right before it.
        """
        starts, ends, names = self._ops_on(lane)
        if not len(starts):
            return None
        i = int(np.searchsorted(starts, ts, side="right")) - 1
        for j in range(i, max(i - 256, -1), -1):
            if ends[j] >= end:
                return self.names[int(names[j])]
        return None
