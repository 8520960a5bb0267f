"""A model that overrides nn.Module's listing methods (to hide or add parameters) and logs each call: python calls
them only where the job does. A trial: gputriage's placement probe called them 7-12 times a step in steps 0-1 and at
the window's end."""

import torch
from common import seeded
from torch import nn

calls = []


class Listed(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))

    def forward(self, x):
        return self.body(x)

    def parameters(self, recurse=True):
        calls.append("parameters")
        return super().parameters(recurse)

    def named_parameters(self, *args, **kwargs):
        calls.append("named_parameters")
        return super().named_parameters(*args, **kwargs)

    def named_buffers(self, *args, **kwargs):
        calls.append("named_buffers")
        return super().named_buffers(*args, **kwargs)

    def named_modules(self, *args, **kwargs):
        calls.append("named_modules")
        return super().named_modules(*args, **kwargs)


seeded()
model = Listed()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
print("setup:", calls)
calls.clear()
x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))
for step in range(8):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, f"{loss.item():.6f}", calls)
    calls.clear()
