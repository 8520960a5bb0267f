"""Tiny synthetic Kineto traces, written the way torch.profiler writes them (times in µs, new-style categories)."""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PID, MAIN_TID, GPU_PID, STREAM = 100, 100, 0, 7
_TS = "@ns:"
_TS_RE = re.compile(r'"@ns:(\d+)"')


def _exact_us(match: re.Match[str]) -> str:
    ns = int(match.group(1))
    return f"{ns // 1000}.{ns % 1000:03d}"


@dataclass
class TraceBuilder:
    """Append events with times in µs from the trace start; `write()` saves a .json or .json.gz file."""

    # Epoch-based µs like real traces, where float64 no longer holds nanoseconds: times are kept as integer ns and
    # written as exact decimal text ("1700000000000010.001").
    base_ns: int = 1_700_000_000_000_000_000
    events: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(
        default_factory=lambda: {"schemaVersion": 1, "deviceProperties": [{"name": "FakeGPU"}]}
    )
    _corr: int = 1000

    def _x(self, cat: str, name: str, ts: float, dur: float, pid: Any, tid: Any, **args: Any) -> None:  # noqa: PLR0917  # the Chrome-trace field order
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": pid,
                "tid": tid,
                "ts": f"{_TS}{self.base_ns + round(ts * 1000)}",
                "dur": dur,
                "args": args,
            }
        )

    def op(self, name: str, ts: float, dur: float, tid: int = MAIN_TID) -> None:
        self._x("cpu_op", name, ts, dur, PID, tid)

    def annotation(self, name: str, ts: float, dur: float, tid: int = MAIN_TID) -> None:
        self._x("user_annotation", name, ts, dur, PID, tid)

    def frame(self, name: str, ts: float, dur: float, tid: int = MAIN_TID) -> None:
        self._x("python_function", name, ts, dur, PID, tid)

    def step(self, index: int, ts: float, dur: float) -> None:
        self.annotation(f"ProfilerStep#{index}", ts, dur)

    def launch(
        self,
        ts: float,
        kernel_ts: float,
        kernel_dur: float,
        name: str = "void gemm_kernel<float>()",
        *,
        call: str = "cudaLaunchKernel",
        call_dur: float = 4.0,
        cat: str = "kernel",
        **args: Any,
    ) -> None:
        """A runtime call on the main thread and the device event it enqueued."""
        self._corr += 1
        self._x("cuda_runtime", call, ts, call_dur, PID, MAIN_TID, correlation=self._corr)
        self._x(cat, name, kernel_ts, kernel_dur, GPU_PID, STREAM, stream=STREAM, correlation=self._corr, **args)

    def runtime(self, name: str, ts: float, dur: float) -> None:
        self._x("cuda_runtime", name, ts, dur, PID, MAIN_TID, correlation=-1)

    def write(self, path: Path, *, gz: bool | None = None) -> Path:
        doc = dict(self.meta)
        doc["traceEvents"] = self.events
        doc["traceName"] = str(path)
        raw = _TS_RE.sub(_exact_us, json.dumps(doc)).encode()
        if gz if gz is not None else path.name.endswith(".gz"):
            raw = gzip.compress(raw)
        path.write_bytes(raw)
        return path


def training_loop(
    steps: int = 5,
    step_us: float = 10_000.0,
    *,
    loader_us: float = 0.0,
    sync_idle_us: float = 0.0,
    cpu_op_us: float = 0.0,
    pageable_copy_us: float = 0.0,
    kernel_us: float = 500.0,
    busy_share: float = 0.97,
    with_nccl: bool = False,
) -> TraceBuilder:
    """A loop of ProfilerSteps: optional loader wait, a H2D copy, kernels, optional CPU op and sync; then idle.

    The CPU enqueues all of a step's kernels early (deep queue, as in a healthy loop), so idle time is only where a
    scenario puts it.
    """
    b = TraceBuilder()
    for i in range(steps):
        t0 = i * step_us
        b.step(i, t0, step_us)
        b.frame("train.py(30): train_step", t0, step_us)
        t = t0
        if loader_us:
            b.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t, loader_us)
            t += loader_us
        if pageable_copy_us:
            b.op("aten::copy_", t, pageable_copy_us + 10)
            b.launch(
                t + 1,
                t + 5,
                pageable_copy_us,
                "Memcpy HtoD (Pageable -> Device)",
                call="cudaMemcpyAsync",
                cat="gpu_memcpy",
                bytes=4 << 20,
            )
            t += pageable_copy_us + 10
        if cpu_op_us:
            b.op("aten::mul", t, cpu_op_us)
            t += cpu_op_us
        budget = step_us * busy_share - (t - t0) - sync_idle_us
        k_ts = t + 20
        launch_ts = t
        while budget >= kernel_us:
            b.launch(launch_ts, k_ts, kernel_us)
            launch_ts += 5
            k_ts += kernel_us
            budget -= kernel_us
        if with_nccl:
            b.launch(
                launch_ts, k_ts, 300.0, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
            )
            k_ts += 300.0
        if sync_idle_us:
            # .item() on the loss: the host blocks until the queue drains, then works in Python while the GPU idles.
            sync_ts = max(launch_ts + 10, k_ts - 200)
            b.frame("train.py(42): train_step", sync_ts - 5, k_ts - sync_ts + 20)
            b.op("aten::item", sync_ts, k_ts - sync_ts + 10)
            b.runtime("cudaStreamSynchronize", sync_ts + 2, k_ts - sync_ts)
    return b
