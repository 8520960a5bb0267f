"""A clean training loop, then pure-Python work after its last step (a test loop, a checkpoint save in a trial's
scripts): that code runs in no training step, so it is never "CPU work in the step" (a re-judge: notes billed the
code after the loop to every step)."""

import os

import torch
from torch import nn

device = os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(32, 4).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _step in range(10):
    x = torch.randn(16, 32, device=device)
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


def after_training() -> int:
    total = 0
    for i in range(3_000_000):
        total += i % 7  # MARK after-loop
    return total


print("done", after_training())
