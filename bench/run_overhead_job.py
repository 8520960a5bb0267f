"""The benchmark's training job: ~800 small CPU steps (an MLP on an in-memory dataset), as a user would write it.

BENCH_PROFILE=1 wraps the loop in `torch.profiler.profile()` with default settings, the anchor users know.
"""

from __future__ import annotations

import contextlib
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

STEPS = 800
BATCH = 32


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)  # steady timings on a shared machine
    data = TensorDataset(torch.randn(STEPS * BATCH, 64), torch.randint(0, 10, (STEPS * BATCH,)))
    loader = DataLoader(data, batch_size=BATCH, shuffle=True)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    profiling = os.environ.get("BENCH_PROFILE") == "1"
    with torch.profiler.profile() if profiling else contextlib.nullcontext():
        for x, y in loader:
            loss = loss_fn(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    print(f"final loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
