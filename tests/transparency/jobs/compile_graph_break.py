"""torch.compile with a graph break in the compiled function: Dynamo runs the print eagerly between two graphs, while
gputriage's census mode is on."""

import torch
from common import Net, batches, seeded
from torch import nn

seeded()
model = Net()


def loss_of(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = model(x)
    print("between graphs", tuple(out.shape))  # a graph break
    return nn.functional.cross_entropy(out * 2, y)


compiled = torch.compile(loss_of, backend="aot_eager")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(6)):
    loss = compiled(x, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.6f}")
