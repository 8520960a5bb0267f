"""Normalisation constants made on the CPU on two adjacent lines, used on the device's batch (Accelerate's cv example
with `.to(accelerator.device)` left out): the crash names `mean`, and `std` is made alike."""

import os

import torch
from torch import nn

device = torch.device(os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu"))
cfg = {"mean": [0.5, 0.4, 0.3], "std": [0.2, 0.2, 0.2]}


def main() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Linear(4 * 6 * 6, 2)).to(device)
    mean = torch.tensor(cfg["mean"])[None, :, None, None]  # MARK made-here
    std = torch.tensor(cfg["std"])[None, :, None, None]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        images = torch.rand(4, 3, 8, 8, device=device)
        out = model((images - mean) / std)
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
