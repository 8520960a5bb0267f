"""A DQN target as Lightning's example writes it: `next_state_values[dones] = 0.0` every step. A write of one scalar
through a boolean mask is not a host sync on CUDA: ATen hands it to masked_fill_, which never counts the mask. Only a
read (`x[mask]`) or a write of many values (`x[mask] = y[mask]`) needs the count on the host."""

import sys

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
net = nn.Linear(8, 4).to(device)
target = nn.Linear(8, 4).to(device)
opt = torch.optim.SGD(net.parameters(), lr=0.01)
write_values = "--write-values" in sys.argv
for _ in range(20):
    states, next_states = torch.randn(32, 8, device=device), torch.randn(32, 8, device=device)
    rewards = torch.randn(32, device=device)
    dones = torch.rand(32, device=device) < 0.1
    values = net(states).max(1)[0]
    with torch.no_grad():
        next_values = target(next_states).max(1)[0]
        if write_values:
            next_values[dones] = rewards[dones]  # MARK host-sync-in-loop
        else:
            next_values[dones] = 0.0
    loss = nn.functional.mse_loss(values, next_values * 0.99 + rewards)
    opt.zero_grad()
    loss.backward()
    opt.step()
