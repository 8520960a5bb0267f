"""A function and a hooked module traced with torch.jit.trace in the first steps, each with Python numbers in it (the
2 of `x * 2`), called there and printed: TorchScript hands such constants to a dispatch mode as Python numbers, and
the traced code failed under the probe window's modes (the seventh trial's P1)."""

import torch
from common import Net, batches, seeded, train_step

seeded()
model = Net()
model.register_forward_pre_hook(lambda m, inputs: (inputs[0] * 2,))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(5)):
    train_step(model, opt, x, y, step)
    scaled = torch.jit.trace(lambda t: t * 2 + 1, torch.ones(3))
    traced = torch.jit.trace(model, x)
    print(step, scaled(torch.ones(3)).tolist(), torch.allclose(traced(x), model(x)), traced.graph.str().count("aten::"))
