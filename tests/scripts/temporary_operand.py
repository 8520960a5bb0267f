"""PPO's update: `rewards` made on the CPU, and the op that dies reads a temporary of it (`rewards.detach()`), which
no name holds once the op has raised. The crash was reported with a generic fix (trial 10)."""

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(4, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(5):
    x = torch.randn(8, 4, device=device)
    values = model(x).squeeze(1)
    rewards = torch.tensor([float(i) for i in range(8)])  # MARK made: never moved
    advantages = rewards.detach() - values.detach()  # MARK crash
    loss = (values * advantages).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
