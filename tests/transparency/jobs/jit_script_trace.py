"""torch.jit.script and torch.jit.trace of the model inside the first steps, saved and reloaded."""

import torch
from common import Net, batches, seeded, train_step
from torch import nn


class WithLoss(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = Net()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(self.net(x), y)


seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(4)):
    train_step(model, opt, x, y, step)
    scripted = torch.jit.script(model)
    traced = torch.jit.trace(model, x)
    print("script", torch.allclose(scripted(x), model(x)), "trace", torch.allclose(traced(x), model(x)))
scripted_loss = torch.jit.script(WithLoss())
print("scripted loss", round(float(scripted_loss(x, y)), 5))
torch.jit.save(scripted, "scripted.pt")
print("reloaded", torch.allclose(torch.jit.load("scripted.pt")(x), model(x)))
