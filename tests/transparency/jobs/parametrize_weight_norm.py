"""nn.utils.parametrize and weight norm on the model, trained, copied and saved."""

import copy

import torch
from common import Net, batches, seeded, train_step
from torch import nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import weight_norm


class Symmetric(nn.Module):
    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return w.triu() + w.triu(1).transpose(-1, -2)


seeded()
model = Net()
model.body.append(nn.Linear(4, 4))
parametrize.register_parametrization(model.body[3], "weight", Symmetric())
weight_norm(model.body[0])
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(5)):
    train_step(model, opt, x, y, step)
    twin = copy.deepcopy(model)
    print("twin", torch.allclose(twin(x), model(x)))
torch.save(model.state_dict(), "param_state.pt")
try:
    torch.save(model, "param_model.pt")  # torch refuses to pickle a parametrized module: it must say so the same way
except RuntimeError as exc:
    print("refused:", str(exc).splitlines()[0])
