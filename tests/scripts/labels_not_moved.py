"""The model and the inputs are moved, the labels are not: the loss sees a CPU target."""

import os

import torch
from torch import nn

device = torch.device(
    os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
)  # written for CUDA; the tests pin meta


def main() -> None:
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        x, y = torch.randn(8, 16).to(device), torch.randint(0, 4, (8,))
        out = model(x)
        loss = criterion(out, y)  # MARK data-on-cpu
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
