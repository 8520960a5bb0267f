"""The PyTorch DQN tutorial's soft update with the target network left on the CPU: the policy net is moved, the target
net is not, and no forward runs it before the update blends the two state dicts (CUDA's mismatch is at the blend).
The answer is the target net's own line, not the blend's."""

import os

import torch
from torch import nn

device = torch.device(os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu"))


class DQN(nn.Module):
    def __init__(self, n_observations: int, n_actions: int) -> None:
        super().__init__()
        self.layer1 = nn.Linear(n_observations, 64)
        self.layer2 = nn.Linear(64, n_actions)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer2(torch.relu(self.layer1(x)))


policy_net = DQN(4, 2).to(device)
target_net = DQN(4, 2)  # MARK model-on-cpu
target_net.load_state_dict(policy_net.state_dict())
optimizer = torch.optim.AdamW(policy_net.parameters(), lr=1e-3)
TAU = 0.005
for _ in range(10):
    state = torch.randn(8, 4, device=device)
    loss = policy_net(state).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    target_state = target_net.state_dict()
    policy_state = policy_net.state_dict()
    for key in policy_state:
        target_state[key] = policy_state[key] * TAU + target_state[key] * (1 - TAU)
    target_net.load_state_dict(target_state)
