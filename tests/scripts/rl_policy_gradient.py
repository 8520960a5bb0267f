"""A REINFORCE loop over a host environment (gym's step API): each step samples an action from a
torch.distributions.Categorical on the device and passes it to `env.step` with `.item()`. The distribution's argument
checks (validate_args, on by default) read the device on the host at every construction and log_prob; the action's
read is inherent to stepping a host environment. `--vector` steps 8 environments with one `.cpu()` read;
`--checks-off` switches the distributions' checks off; `--select-action` reads the action in a function that returns
it (`return action.item()`, pytorch/examples' actor_critic), and the loop steps the environment with what it got."""

import argparse
import os
import random

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--vector", action="store_true")
parser.add_argument("--checks-off", action="store_true")
parser.add_argument("--select-action", action="store_true")
args = parser.parse_args()
if args.checks_off:
    torch.distributions.Distribution.set_default_validate_args(False)
device = torch.device(os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu"))
envs_n = 8 if args.vector else 1


class LineWorld:
    def reset(self):
        self.t = 0
        return [random.random() for _ in range(4)]

    def step(self, action):
        self.t += 1
        return [random.random() + 0.01 * float(action) for _ in range(4)], 1.0, self.t >= 25, {}


class VectorWorld:
    def __init__(self, n):
        self.worlds = [LineWorld() for _ in range(n)]

    def reset(self):
        return [w.reset() for w in self.worlds]

    def step(self, actions):
        return [w.step(a)[0] for w, a in zip(self.worlds, actions, strict=True)]


def select_action(logits):
    action = torch.distributions.Categorical(logits=logits).sample()
    return action.item()  # MARK returned-read


policy = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2)).to(device)
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
envs = VectorWorld(envs_n)
observations = envs.reset()
for _ in range(60):
    state = torch.tensor(observations, dtype=torch.float32, device=device)
    logits = policy(state)
    action = torch.distributions.Categorical(logits=logits).sample()  # MARK distribution-check
    if args.vector:
        actions = action.cpu().tolist()  # MARK vector-read
        observations = envs.step(actions)
    elif args.select_action:
        chosen = select_action(logits)
        obs, reward, done, _ = envs.worlds[0].step(chosen)
        observations = [envs.worlds[0].reset() if done else obs]
    else:
        obs, reward, done, _ = envs.worlds[0].step(action.item())  # MARK env-step
        observations = [envs.worlds[0].reset() if done else obs]
    loss = -torch.distributions.Categorical(logits=logits).log_prob(action).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
