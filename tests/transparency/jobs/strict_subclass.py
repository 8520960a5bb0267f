"""Inputs as a Tensor subclass whose __torch_function__ refuses what it was not written for (the pattern of torch's
"Extending torch" notes) and counts what it gets: gputriage's reads of `.device` and `.is_cpu` reached it, and the job
died at its first `.item()` ("does not support __get__"); a counting one counted them."""

import torch
from common import Net, batches, seeded
from torch import nn

ALLOWED = {"linear", "relu", "cross_entropy", "backward", "item"}
calls: list[str] = []


class Strict(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        calls.append(name)
        if name not in ALLOWED:
            raise TypeError(f"Strict tensor does not support {name}")
        return super().__torch_function__(func, types, args, kwargs or {})


seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(4)):
    loss = nn.functional.cross_entropy(model(x.as_subclass(Strict)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, f"{loss.item():.6f}", len(calls))
