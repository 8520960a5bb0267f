"""A loop that never moves anything to the device: it runs fine, on the CPU. Exits with argv[1] when given."""

import sys

import torch
from torch import nn

model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(4):
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
if len(sys.argv) > 1:
    sys.exit(int(sys.argv[1]))
