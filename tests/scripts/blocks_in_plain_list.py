"""The blocks of a model kept in a plain Python list instead of nn.ModuleList: model.to(device) never moves them, and
model.parameters() never yields them (the optimizer would not train them either)."""

import os

import torch
from torch import nn

device = torch.device(
    os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
)  # written for CUDA; the tests pin meta


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.blocks = [nn.Linear(32, 32) for _ in range(3)]  # MARK model-partly-on-cpu
        self.out = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        for block in self.blocks:
            x = torch.relu(block(x))
        return self.out(x)


def main() -> None:
    model = Net().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        x, y = torch.randn(8, 16, device=device), torch.randint(0, 4, (8,), device=device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
