"""The benchmark's training job: an MLP on an in-memory dataset through a DataLoader, as a user would write it.

    run_overhead_job.py STEPS WIDTH [SUMMARY.json]

WIDTH sets the step's cost (bench/run_overhead.py picks it for a target step time). With SUMMARY.json, the job
writes what only it can time: the wall clock when its first line ran, when its imports were done and when its last
line ran, the wall time and the training thread's CPU time of each step (from one optimizer step to the next), and
the process's CPU time at its last line, so that the benchmark can tell start-up, the steps and the end apart.
BENCH_PROFILE=1 wraps the loop in `torch.profiler.profile()` with default settings, the anchor users know.
"""

from __future__ import annotations

import time

FIRST_LINE_S = time.time()

import contextlib  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

IMPORTED_S = time.time()
BATCH = 32


def main() -> None:
    steps, width = int(sys.argv[1]), int(sys.argv[2])
    summary = sys.argv[3] if len(sys.argv) > 3 else None
    torch.manual_seed(0)
    torch.set_num_threads(1)  # steady timings on a shared machine
    data = TensorDataset(torch.randn(max(steps, 1) * BATCH, 64), torch.randint(0, 10, (max(steps, 1) * BATCH,)))
    loader = DataLoader(data, batch_size=BATCH, shuffle=True)
    model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    profiling = os.environ.get("BENCH_PROFILE") == "1"
    marks = [time.perf_counter()]
    cpu_marks = [time.thread_time()]  # the training thread's own CPU time: what other processes' load cannot stretch
    with torch.profiler.profile() if profiling else contextlib.nullcontext():
        for step, (x, y) in enumerate(loader):
            if step == steps:
                break
            loss = loss_fn(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            marks.append(time.perf_counter())
            cpu_marks.append(time.thread_time())
    print(f"final loss {loss.item():.3f}" if steps else "no steps")
    if summary is not None:
        step_s = [b - a for a, b in itertools.pairwise(marks)]
        step_cpu_s = [b - a for a, b in itertools.pairwise(cpu_marks)]
        times = {"first_line_s": FIRST_LINE_S, "imported_s": IMPORTED_S, "last_line_s": time.time()}
        times["process_cpu_s"] = time.process_time()  # this process's CPU until its last line (no report worker)
        with open(summary, "w") as f:  # noqa: PTH123
            json.dump({**times, "step_s": step_s, "step_cpu_s": step_cpu_s}, f)


if __name__ == "__main__":
    main()
