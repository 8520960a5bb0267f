"""A training loop whose step waits a fixed time (`--sleep-ms`, default 50): the same job before and after a change
that makes each step slower, for `gputriage compare` and `run --baseline ... --fail-on regression` (README)."""

import argparse
import os
import time

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sleep-ms", type=float, default=50.0)
    args = parser.parse_args()
    device = torch.device(os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu"))
    model = nn.Linear(4, 2).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(12):
        x = torch.randn(8, 4, device=device)
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(args.sleep_ms / 1000)  # the step's own work, as far as the host can tell


if __name__ == "__main__":
    main()
