"""The job changes its working directory, then writes its checkpoints with relative paths."""

import os

import torch
from common import Net, batches, seeded, train_step

os.makedirs("run1", exist_ok=True)
os.chdir("run1")
seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(4)):
    train_step(model, opt, x, y, step)
torch.save(model.state_dict(), "model.pt")
print("cwd", os.path.basename(os.getcwd()))
