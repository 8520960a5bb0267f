"""Gradient accumulation without a DataLoader, as nanoGPT does by default (40 micro-steps per optimizer step, batches
from its own get_batch): a step is the optimizer's, not each backward's."""

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(8, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for it in range(12):
    for _ in range(40):
        loss = model(torch.randn(4, 8, device=device)).pow(2).mean() / 40
        loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    print("optimizer step", it)
