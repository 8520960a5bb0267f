"""A job that trains until it is killed, with its labels left on the CPU (so the report has something to say)."""

import os
import sys
import time

import torch
from torch import nn

device = torch.device(
    os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
)  # written for CUDA; the tests pin meta


def main() -> None:
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = 0
    while True:
        x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
        loss = nn.functional.cross_entropy(model(x), y)  # MARK data-on-cpu
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step == 5:
            print("ready", flush=True)
            sys.stdout.flush()
        time.sleep(0.01)


if __name__ == "__main__":
    main()
