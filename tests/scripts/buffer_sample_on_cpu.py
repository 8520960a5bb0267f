"""A replay buffer (a plain class, not an nn.Module) samples its batch on the CPU, and the loop passes it to the model
on the device: the fix makes the batch on the device where the buffer makes it, with the file's own device variable
(the buffer has no .parameters() to ask)."""

import collections
import os
import random

import torch
from torch import nn

device = torch.device(os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu"))


class ReplayBuffer:
    def __init__(self) -> None:
        self.buffer: collections.deque[tuple[list[float], int]] = collections.deque(maxlen=1000)

    def put(self, item: tuple[list[float], int]) -> None:
        self.buffer.append(item)

    def sample(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        batch = random.sample(list(self.buffer), n)
        states = [s for s, _ in batch]
        actions = [a for _, a in batch]
        return torch.tensor(states, dtype=torch.float), torch.tensor(actions)  # MARK made-here


def main() -> None:
    q = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2)).to(device)
    opt = torch.optim.SGD(q.parameters(), lr=0.01)
    memory = ReplayBuffer()
    for i in range(64):
        memory.put(([random.random() for _ in range(4)], i % 2))
    for _ in range(5):
        s, a = memory.sample(8)
        out = q(s)  # MARK data-on-cpu
        loss = out.gather(1, a.unsqueeze(1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
