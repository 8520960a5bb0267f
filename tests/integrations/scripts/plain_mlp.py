"""The plain loop that tests/integrations/test_lightning.py trains through Lightning: same data, model, optimizer."""

import torch
from tiny import mlp, mlp_loader
from torch import nn

model = mlp()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for x, y in mlp_loader():
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
