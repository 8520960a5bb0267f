"""Run as `python -m pkgjob.train`: a module in a package, with a relative import."""

import sys

import torch
from common import Net, batches, seeded, train_step  # `python -m` puts the working directory first on sys.path

from .helpers import describe

seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(3)):
    train_step(model, opt, x, y, step)
print(describe(), __name__, __package__, sys.argv[1:], sys.argv[0].endswith("train.py"))
raise SystemExit(3)
