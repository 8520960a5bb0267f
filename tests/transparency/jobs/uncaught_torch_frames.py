"""Uncaught errors whose tracebacks hold torch's own frames: an op's shape error inside a census step (torch's
dispatch frames there are gputriage's mode's, and go), or, with `resume`, an optimizer resumed from the wrong
checkpoint after the window (torch/_compile.py and eval_frame.py are torch's own there, and stay: every uncaught
traceback lost them, the seventh trial's P6)."""

import sys

import torch
from common import Net, batches, seeded, train_step

seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(8)):
    train_step(model, opt, x, y, step)
    if step == 2 and sys.argv[1:] == ["census"]:
        torch.ops.aten.mm.default(x, x)  # a shape error in the census's steps, uncaught
other = torch.optim.Adam([torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1))])
opt.load_state_dict(other.state_dict())  # resuming from the wrong checkpoint: ValueError
