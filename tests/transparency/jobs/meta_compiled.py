"""A step compiled with fullgraph=True, run on `meta` under `--expect-device meta`: the meta host-read mode on the
stack made torch.compile refuse the graph (exit 1), and without fullgraph run the step eagerly (the seventh trial's
P4)."""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)).to("meta")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
step_fn = torch.compile(lambda x, y: nn.functional.cross_entropy(model(x), y), backend="eager", fullgraph=True)
for step in range(5):
    x, y = torch.randn(4, 8, device="meta"), torch.randint(0, 2, (4,), device="meta")
    loss = step_fn(x, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, tuple(loss.shape), loss.device)
