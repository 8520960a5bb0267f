"""Text that is not UTF-8: in argv, in what the job prints, in an exception message."""

import os
import sys

import torch
from common import Net, batches, seeded, train_step

print("argv", [a.encode("utf-8", "surrogateescape") for a in sys.argv])
seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(3)):
    train_step(model, opt, x, y, step)
with open(os.fsdecode(b"out_\xe9.txt"), "w") as f:
    f.write("written\n")
if "--raise" in sys.argv:
    raise ValueError("bad byte: " + os.fsdecode(b"caf\xe9"))
