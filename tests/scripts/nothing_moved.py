"""A training loop that never moves anything to the device: model, inputs and labels stay on the CPU.

With an argument, it ends with sys.exit(that code), as a job reporting a bad metric would.
"""

import os
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")  # meant, never used


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def main() -> None:
    data = TensorDataset(torch.randn(64, 16), torch.randint(0, 4, (64,)))
    loader = DataLoader(data, batch_size=8)
    model = Net()  # MARK model-on-cpu
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    for x, y in loader:
        loss = loss_fn(model(x), y)  # MARK data-on-cpu
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("done", flush=True)
    if len(sys.argv) > 1:
        sys.exit(int(sys.argv[1]))


if __name__ == "__main__":
    main()
