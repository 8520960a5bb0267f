"""The FLOPs of the first step, measured with torch's FlopCounterMode around it, then training on without it: the
mode must be off the dispatch stack once the `with` ends (gputriage's own mode, pushed inside it, was what the
user's exit took off), and its count must not grow."""

import torch
from common import Net, batches, seeded, train_step
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
from torch.utils.flop_counter import FlopCounterMode

seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
counter = FlopCounterMode(display=False)
for step, (x, y) in enumerate(batches(6)):
    if step == 0:
        with counter:
            train_step(model, opt, x, y, step)
        first = counter.get_total_flops()
    else:
        train_step(model, opt, x, y, step)
left = [type(m).__name__ for m in _get_current_dispatch_mode_stack()]
print("first step flops", first, "counted later", counter.get_total_flops() - first)
print("the user's mode still on", "FlopCounterMode" in " ".join(left))
