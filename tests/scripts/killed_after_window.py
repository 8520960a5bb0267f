"""Trains past the probe window (run it with --steps 3), then dies the way no handler sees: os._exit or SIGKILL."""

import os
import signal
import sys
import time

import torch
from torch import nn

model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(6):
    loss = nn.functional.cross_entropy(model(torch.randn(4, 8)), torch.randint(0, 2, (4,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
time.sleep(float(os.environ.get("BEFORE_DEATH_S", "3")))  # the partial record is written meanwhile
if sys.argv[1] == "SIGKILL":
    os.kill(os.getpid(), signal.SIGKILL)
os._exit(7)
