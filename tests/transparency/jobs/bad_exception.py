"""The job dies of an exception whose __str__ raises, after a custom sys.excepthook was installed and removed."""

import sys

import torch
from common import Net, batches, seeded, train_step


class Broken(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


sys.excepthook = sys.__excepthook__
seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(3)):
    train_step(model, opt, x, y, step)
raise Broken()
