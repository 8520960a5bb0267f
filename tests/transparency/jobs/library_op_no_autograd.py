"""The job's own operators with Python kernels and no autograd formula, one defined through a Library, one through
torch.library.impl for the CPU, used in the forward and printed with their gradients: called plainly their kernels'
ops record the gradient; under a dispatch mode torch ran them below autograd and the optimizer steps of the probe
window did nothing (trial 8's P1: the loss and the saved weights differed)."""

import torch
from common import Net, batches, seeded

lib = torch.library.Library("gtjob", "DEF")
lib.define("twice(Tensor x) -> Tensor")
lib.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")
torch.library.define("gtjob2::thrice", "(Tensor x) -> Tensor")


@torch.library.impl("gtjob2::thrice", "cpu")
def thrice(x):
    return x * 3


seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(6)):
    out = torch.ops.gtjob2.thrice(torch.ops.gtjob.twice(model(x)))
    loss = torch.nn.functional.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()
    grad = next(model.parameters()).grad
    total = None if grad is None else round(grad.abs().sum().item(), 6)
    print(step, type(out.grad_fn).__name__, total, round(loss.item(), 6))
    opt.step()
