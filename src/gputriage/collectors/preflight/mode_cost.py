"""What the preflight's mode costs the host for each torch call it sees, measured on this host at the start.

The mode (redirect.CudaRedirect) sees every torch call of the job's thread, the DataLoader's too: each `tensor[i]` of
a TensorDataset, each `torch.stack` of its collate. A Python TorchFunctionMode costs about 3-4 us a call on this
project's 2-core runner, twice the call itself, and a GPU run does not pay it. Left in, a main-process loader of a
small in-memory dataset took 1.8 ms a batch under the preflight against 0.7 ms under a plain `gputriage run`, a false
"input-pipeline-bound" on a slow CI runner. The preflight counts the calls the mode sees outside the stand-in's own
timed compute (state.py), and leaves out that count times this cost, as it leaves out the stand-in's compute.

The cost is the median round of a cheap call (indexing a small tensor) under the mode less its median round without:
medians, so a burst of another process in one round does not set it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from gputriage.stdlib import statistics

ROUNDS = 9
CALLS_PER_ROUND = 128  # 2 x 9 x 128 calls: about 10 ms on a slow 2-core runner


def per_call_s(make_mode: Callable[[], Any]) -> float:
    """Seconds the mode that `make_mode` builds adds to one torch call on this host (0.0 when none is measured)."""
    rows = torch.zeros(16, 4)
    plain_s, under_mode_s = [], []
    for _ in range(ROUNDS):  # interleaved, so that a change of the machine's speed falls on both
        plain_s.append(_round_s(rows))
        with make_mode():
            under_mode_s.append(_round_s(rows))
    return max(0.0, statistics.median(under_mode_s) - statistics.median(plain_s)) / CALLS_PER_ROUND


def _round_s(rows: torch.Tensor) -> float:
    started_s = time.perf_counter()
    for i in range(CALLS_PER_ROUND):
        rows[i & 15]
    return time.perf_counter() - started_s
