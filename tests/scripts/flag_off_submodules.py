"""vwxyzjn/cleanrl's shape: the device comes from a `--cuda` flag, and the agent's sub-networks are called through
its methods (`agent.get_value(x)` calls `self.critic(x)`), so the agent itself is never called. Run with the flag
off, everything is moved to the CPU: the sub-networks inherit the agent's move, and the fix is the device choice."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--cuda", type=lambda s: s.lower() == "true", default=False)
args = parser.parse_args()
device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")  # MARK data-on-cpu


class Agent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 2))
        self.critic = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 1))

    def get_action_and_value(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.actor(x), self.critic(x)


agent = Agent().to(device)
optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4)
for _update in range(20):
    obs = torch.randn(8, 4).to(device)
    logits, value = agent.get_action_and_value(obs)
    loss = logits.logsumexp(-1).mean() + value.pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
