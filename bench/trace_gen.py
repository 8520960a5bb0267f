"""Generate a realistic Kineto trace of a given size and shape: the event mix and arg payloads of torch.profiler.

Shapes:
- "cnn" (default): a CNN training loop on one GPU (record_shapes, with_stack), one kernel per op, a DataLoader
  wait and a sync every step;
- "kernels": kernel-heavy and multi-stream: few CPU ops, each launching several kernels spread over 4 compute
  streams, plus copies and an NCCL stream (most events are GPU events);
- "cpu": CPU-op-heavy: nests of ATen ops, few kernels (most events are CPU events).

Usage: python bench/trace_gen.py OUT.json SIZE_MB [SHAPE]
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

_KERNELS = [
    "void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, int, float const*, int, "
    "float*, float const*, kernel_grad_params, unsigned long long, int, float, int, int, int, int)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, "
    "3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "volta_sgemm_128x64_nn",
    "void at::native::(anonymous namespace)::batch_norm_collect_statistics_kernel<float, float, float, int>(...)",
]
_NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
_OPS = ["aten::conv2d", "aten::add_", "aten::addmm", "aten::batch_norm", "aten::relu_", "aten::mul"]
_OPS_PER_STEP = 400

# One op's events as Kineto writes them (one object per line), with %-placeholders for the moving parts.
_OP_TEMPLATE = ",\n".join(
    [
        '  {"ph": "X", "cat": "python_function", "name": "%(frame)s", "pid": 1, "tid": 1, "ts": %(t).3f, '
        '"dur": %(fdur).3f, "args": {"Python parent id": 1, "Python id": %(ext)d, "Python thread": 0}}',
        '  {"ph": "X", "cat": "cpu_op", "name": "%(op)s", "pid": 1, "tid": 1, "ts": %(t).3f, "dur": %(odur).3f, '
        '"args": {"External id": %(ext)d, "Record function id": 0, "Sequence number": %(corr)d, "Fwd thread id": 0, '
        '"Input Dims": [[64, 256, 56, 56], [256, 256, 3, 3], [], [], []], '
        '"Input type": ["float", "float", "ScalarList", "ScalarList", "Int"]}}',
        '  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": %(rt).3f, '
        '"dur": 5.5, "args": {"External id": %(ext)d, "cbid": 211, "correlation": %(corr)d}}',
        '  {"ph": "s", "id": %(corr)d, "pid": 1, "tid": 1, "ts": %(rt).3f, "cat": "ac2g", "name": "ac2g"}',
        '  {"ph": "X", "cat": "kernel", "name": "%(kernel)s", "pid": 0, "tid": 7, "ts": %(g).3f, "dur": %(kdur).3f, '
        '"args": {"External id": %(ext)d, "queued": 0, "device": 0, "context": 1, "stream": 7, '
        '"correlation": %(corr)d, '
        '"registers per thread": 64, "shared memory": 16384, "blocks per SM": 2.5, "warps per SM": 10.0, '
        '"grid": [432, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %%": 50}}',
        '  {"ph": "f", "id": %(corr)d, "pid": 0, "tid": 7, "ts": %(g).3f, "cat": "ac2g", "name": "ac2g", "bp": "e"}',
    ]
)


def _step_events(rng: random.Random, step: int, t: float, ids: list[int]) -> tuple[list[str], float]:
    """One ProfilerStep: a DataLoader wait, 400 ops that each launch a kernel, an all-reduce, then .item()."""
    start = t
    loader_us = rng.uniform(2000, 6000)
    out = [
        '  {"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.'
        f'__next__", "pid": 1, "tid": 1, "ts": {t:.3f}, "dur": {loader_us:.3f}, "args": {{"External id": {ids[0]}}}}}'
    ]
    t += loader_us
    gpu_t = t + 50
    for k in range(_OPS_PER_STEP):
        ids[0] += 1
        ids[1] += 1
        op_us = rng.uniform(15, 40)
        kernel_us = rng.choice((3.0, 8.0, 25.0, 60.0, 140.0))
        last = k == _OPS_PER_STEP - 1
        out.append(
            _OP_TEMPLATE
            % {
                "frame": "train.py(42): train_step" if k % 50 == 0 else "torch/nn/modules/module.py(1501): _call_impl",
                "op": _OPS[k % len(_OPS)],
                "t": t,
                "fdur": op_us + 2,
                "odur": op_us,
                "rt": t + 2,
                "ext": ids[0],
                "corr": ids[1],
                "kernel": _NCCL if last else _KERNELS[k % len(_KERNELS)],
                "g": gpu_t,
                "kdur": kernel_us,
            }
        )
        gpu_t += kernel_us + rng.uniform(0.5, 3)
        t += op_us + 3
    ids[1] += 1
    out.append(
        f'  {{"ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": 1, "tid": 1, "ts": {t:.3f}, '
        f'"dur": {gpu_t - t + 20:.3f}, "args": {{"External id": {ids[0]}}}}}'
    )
    out.append(
        f'  {{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 1, '
        f'"ts": {t + 2:.3f}, "dur": {max(gpu_t - t, 1.0):.3f}, "args": {{"correlation": {ids[1]}}}}}'
    )
    end = max(t, gpu_t) + 30
    out.insert(
        0,
        f'  {{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", "pid": 1, "tid": 1, '
        f'"ts": {start:.3f}, "dur": {end - start:.3f}, "args": {{"External id": {ids[0]}}}}}',
    )
    return out, end


_KERNEL_EVENT = (
    '  {"ph": "X", "cat": "kernel", "name": "%(kernel)s", "pid": 0, "tid": %(stream)d, "ts": %(g).3f, '
    '"dur": %(kdur).3f, "args": {"External id": %(ext)d, "queued": 0, "device": 0, "context": 1, "stream": %(stream)d, '
    '"correlation": %(corr)d, "registers per thread": 64, "shared memory": 16384, "blocks per SM": 2.5, '
    '"warps per SM": 10.0, "grid": [432, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %%": 50}}'
)
_LAUNCH_EVENT = (
    '  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": %(rt).3f, '
    '"dur": 4.5, "args": {"External id": %(ext)d, "cbid": 211, "correlation": %(corr)d}}'
)


def _kernel_step(rng: random.Random, step: int, t: float, ids: list[int]) -> tuple[list[str], float]:
    """One step of the kernel-heavy shape: 60 ops, each launching 6 kernels over 4 streams, a copy, an all-reduce."""
    start, out = t, []
    gpu = [t + 20.0] * 6
    for k in range(60):
        ids[0] += 1
        out.append(
            f'  {{"ph": "X", "cat": "cpu_op", "name": "{_OPS[k % len(_OPS)]}", "pid": 1, "tid": 1, "ts": {t:.3f}, '
            f'"dur": 40.000, "args": {{"External id": {ids[0]}}}}}'
        )
        for j in range(6):
            ids[1] += 1
            stream = 7 + (j % 4) * 4
            lane = j % 4
            kdur = rng.choice((2.0, 6.0, 15.0, 40.0))
            gpu[lane] = max(gpu[lane], t + 5) + rng.uniform(0.5, 2)
            fields = {"kernel": _KERNELS[j % len(_KERNELS)], "stream": stream, "g": gpu[lane], "kdur": kdur}
            fields.update(ext=ids[0], corr=ids[1], rt=t + 2 + j * 5)
            out.append(_LAUNCH_EVENT % fields)
            out.append(_KERNEL_EVENT % fields)
            gpu[lane] += kdur
        t += 45.0
    ids[1] += 1
    out.append(
        f'  {{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 5, '
        f'"ts": {start + 5:.3f}, "dur": 30.000, "args": {{"stream": 5, "correlation": {ids[1]}, "bytes": 4194304}}}}'
    )
    ids[1] += 1
    fields = {"kernel": _NCCL, "stream": 40, "g": max(gpu) + 1, "kdur": 80.0, "ext": ids[0], "corr": ids[1], "rt": t}
    out.append(_LAUNCH_EVENT % fields)
    out.append(_KERNEL_EVENT % fields)
    end = max(t, max(gpu) + 81) + 10
    out.insert(
        0,
        f'  {{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", "pid": 1, "tid": 1, '
        f'"ts": {start:.3f}, "dur": {end - start:.3f}, "args": {{"External id": {ids[0]}}}}}',
    )
    return out, end


def _cpu_step(rng: random.Random, step: int, t: float, ids: list[int]) -> tuple[list[str], float]:
    """One step of the CPU-op-heavy shape: 150 top-level ops, each a nest of 4 ATen ops (no Python frames: HTA 0.6.1
    fails on 100 MB of them with a pandas int16 overflow, and the point here is the CPU ops)."""
    start, out = t, []
    for k in range(150):
        ids[0] += 1
        op_us = rng.uniform(20, 60)
        inner_t, inner_d = t + 1, op_us
        for depth in range(4):
            ids[0] += 1
            out.append(
                f'  {{"ph": "X", "cat": "cpu_op", "name": "{_OPS[(k + depth) % len(_OPS)]}", "pid": 1, "tid": 1, '
                f'"ts": {inner_t:.3f}, "dur": {inner_d:.3f}, "args": {{"External id": {ids[0]}, "Record function id": '
                f'0, "Sequence number": {ids[0]}, "Input Dims": [[64, 256], [256, 256]], "Input type": ["float", '
                f'"float"]}}}}'
            )
            inner_t += 1
            inner_d -= 3
        if k % 10 == 0:
            ids[1] += 1
            fields = {"kernel": _KERNELS[k % len(_KERNELS)], "stream": 7, "g": t + 8, "kdur": 20.0}
            fields.update(ext=ids[0], corr=ids[1], rt=t + 4)
            out.append(_LAUNCH_EVENT % fields)
            out.append(_KERNEL_EVENT % fields)
        t += op_us + 6
    out.insert(
        0,
        f'  {{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", "pid": 1, "tid": 1, '
        f'"ts": {start:.3f}, "dur": {t - start:.3f}, "args": {{"External id": {ids[0]}}}}}',
    )
    return out, t


SHAPES = {"cnn": _step_events, "kernels": _kernel_step, "cpu": _cpu_step}


def generate(path: Path, size_mb: float, seed: int = 0, shape: str = "cnn") -> int:
    """Write the trace (epoch-µs timestamps with ns decimals, as recent Kineto does); return its event count."""
    step_events = SHAPES[shape]
    rng = random.Random(seed)
    target = int(size_mb * (1 << 20))
    header = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0}],
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
    }
    written = events = step = 0
    t = 1_712_195_495_505_543.0
    ids = [0, 0]  # external id, correlation id
    with path.open("w") as fh:
        fh.write(json.dumps(header)[:-1] + ',\n  "traceEvents": [\n')
        while written < target:
            lines, t = step_events(rng, step, t, ids)
            chunk = ("" if step == 0 else ",\n") + ",\n".join(lines)
            fh.write(chunk)
            written += len(chunk)
            events += chunk.count('{"ph"')
            step += 1
        fh.write('\n  ],\n  "traceName": "generated",\n  "displayTimeUnit": "ms"\n}\n')
    return events


if __name__ == "__main__":
    out, size = Path(sys.argv[1]), float(sys.argv[2])
    shape_ = sys.argv[3] if len(sys.argv) > 3 else "cnn"
    out.parent.mkdir(parents=True, exist_ok=True)
    print(f"{generate(out, size, shape=shape_)} events -> {out} ({out.stat().st_size / 2**20:.0f} MiB)")
