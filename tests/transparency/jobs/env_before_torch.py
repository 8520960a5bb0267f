"""A script that sets the thread count in its environment at its top, before it imports torch (a common first line):
torch reads it as it loads, so gputriage must not have loaded torch before the script's first line."""

import os

os.environ["OMP_NUM_THREADS"] = "2"

import torch  # after the environment is set, on purpose
from common import Net, batches, train_step

print("threads", torch.get_num_threads())
torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(6)):
    train_step(model, opt, x, y, step)
