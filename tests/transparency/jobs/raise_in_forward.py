"""An error deep in the model's forward, and one in a tensor method, mid-training: the traceback as Python prints it."""

import sys

import torch
from common import Net, batches, seeded, train_step
from torch import nn


class Fragile(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = Net()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.net(x)
        if out.shape[0] == 3:
            raise RuntimeError("a batch of 3 is not supported")
        return out


seeded()
model = Fragile()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(3)):
    train_step(model, opt, x, y, step)
try:
    torch.randn(3).item()
except RuntimeError as exc:
    import traceback

    traceback.print_exc()
    print("caught", type(exc).__name__)
sys.stdout.flush()
model(torch.randn(3, 8))
