"""The AMP recipe's shape: a first loop, then a second one with a new optimizer bound to the same name."""

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(16, 4).to(device)
for loop in ("first", "second"):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(6):
        loss = model(torch.randn(8, 16, device=device)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    print(f"{loop} loop done", flush=True)
