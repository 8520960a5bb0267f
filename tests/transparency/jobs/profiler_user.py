"""The job runs its own torch.profiler with Python stacks over its first steps, and reads the module names."""

import torch
from common import Net, batches, seeded, train_step

seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with torch.profiler.profile(with_stack=True, with_modules=True) as prof:
    for step, (x, y) in enumerate(batches(3)):
        train_step(model, opt, x, y, step)
names = sorted({e.name for e in prof.events() if e.name.startswith("nn.Module")})
print("module spans", names)
