"""A loop on a real accelerator that reads the loss with .item() every step (argv[1]: the device, e.g. cuda)."""

import sys

import torch
from torch import nn


def main() -> None:
    device = torch.device(sys.argv[1])
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    total = 0.0
    for _ in range(20):
        x, y = torch.randn(512, 256, device=device), torch.randint(0, 10, (512,), device=device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item()  # MARK host-sync-in-loop
    print(f"mean loss {total / 20:.3f}")


if __name__ == "__main__":
    main()
