"""cleanrl's PPO agent, never moved: the loop calls its actor and critic (Sequentials built in __init__) through its
own methods, so no forward of the agent itself runs. The line to change is where the agent is made."""

import os

import torch
from torch import nn

device = torch.device(os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu"))


class Agent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.critic = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 1))
        self.actor = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 4))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action(self, x: torch.Tensor) -> torch.Tensor:
        return self.actor(x).softmax(-1)


agent = Agent()  # MARK model-on-cpu
optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4)
for _ in range(10):
    obs = torch.randn(16, 8).to(device)
    loss = agent.get_value(obs).pow(2).mean() - agent.get_action(obs).max(-1).values.mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
