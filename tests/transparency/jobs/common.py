"""What every job shares: a seeded model, a seeded batch stream, and the loss line each step prints."""

import torch
from torch import nn


def seeded(seed: int = 0) -> None:
    torch.manual_seed(seed)
    torch.set_num_threads(1)


class Net(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def batches(n: int, size: int = 8):
    g = torch.Generator().manual_seed(1)
    for _ in range(n):
        yield torch.randn(size, 8, generator=g), torch.randint(0, 4, (size,), generator=g)


def train_step(model, opt, x, y, step: int) -> float:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    value = loss.item()
    print(f"step {step} loss {value:.6f}")
    return value
