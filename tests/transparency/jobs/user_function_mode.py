"""The job counts the torch calls of its steps with its own TorchFunctionMode: in the probe window it counted
gputriage's own reads of its tensors too (`numel`, `__get__` of `.device`), and printed other numbers (the seventh
trial's P14)."""

import collections

import torch
from common import Net, batches, seeded
from torch import nn
from torch.overrides import TorchFunctionMode


class Count(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: collections.Counter[str] = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.calls[getattr(func, "__name__", str(func))] += 1
        return func(*args, **(kwargs or {}))


seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(6)):
    with Count() as counted:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        value = loss.item()
    print(step, round(value, 6), sum(counted.calls.values()), sorted(counted.calls.items()))
