"""A healthy loop that dies of a bug that has nothing to do with devices."""

import os

import torch
from torch import nn

device = torch.device(
    os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
)  # written for CUDA; the tests pin meta


def check_config(step: int) -> None:
    if step == 3:
        raise ValueError("learning-rate schedule ended early")  # MARK crash


def main() -> None:
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(6):
        x, y = torch.randn(8, 16, device=device), torch.randint(0, 4, (8,), device=device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        check_config(step)


if __name__ == "__main__":
    main()
