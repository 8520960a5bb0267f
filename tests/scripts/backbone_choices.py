"""A model that keeps its candidate backbones in a plain dict and registers the chosen one (sthalles/SimCLR's
ResNetSimCLR): the unused backbone stays on the CPU, harmlessly. A control: nothing to report."""

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"


class Encoder(nn.Module):
    def __init__(self, arch: str = "small") -> None:
        super().__init__()
        self.choices = {"small": nn.Linear(16, 8), "large": nn.Sequential(nn.Linear(16, 64), nn.Linear(64, 8))}
        self.backbone = self.choices[arch]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)


model = Encoder().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(15):
    loss = model(torch.randn(4, 16, device=device)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
