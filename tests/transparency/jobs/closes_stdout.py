"""The job closes sys.stdout before it ends."""

import sys

import torch
from common import Net, batches, seeded, train_step

seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(3)):
    train_step(model, opt, x, y, step)
sys.stdout.flush()
sys.stdout.close()
print("stderr still open", file=sys.stderr)
