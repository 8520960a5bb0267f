"""torch.compile(fullgraph=True) and torch.export in the probe window, of code that meets gputriage's wrappers: an
unbound `torch.Tensor.to(t, ...)` (a tree_map over a batch), a forward that sets an attribute (a call counter), and
the export of such a module, strict and not. Each failed under gputriage (Dynamo could not trace the wrapper, or took
the `__setattr__` wrapper for another method of nn.Module; the non-strict export ended the process), or broke the
graph where python compiled one (trial 8's P2 and P3)."""

import torch
from common import Net, batches, seeded, train_step
from torch import nn


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)
        self.calls = 0

    def forward(self, x):
        self.calls = self.calls + 1
        return self.lin(x)


@torch.compile(backend="eager", fullgraph=True)
def as_float(x):
    return torch.Tensor.to(x, torch.float32).sum()


seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(5)):
    train_step(model, opt, x, y, step)
    counted = Counter()
    compiled = torch.compile(counted, backend="eager", fullgraph=True)
    print(step, as_float(x.double()).item() == x.sum().item(), compiled(x).shape, counted.calls)
    if step == 1:
        for strict in (False, True):
            exported = torch.export.export(Counter(), (x,), strict=strict)
            print("export", strict, len(list(exported.graph.nodes)))
