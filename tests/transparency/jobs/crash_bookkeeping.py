"""The job dies of an uncaught exception, with a custom sys.excepthook that itself raises, and an atexit handler that
reads sys.last_value (a post-mortem debugger's entry): Python prints "Error in sys.excepthook:", the hook's traceback,
then "Original exception was:", and sets sys.last_* first (a trial: both differed)."""

import atexit
import sys

import torch
from common import Net, batches, seeded, train_step


def broken_hook(kind: type, value: BaseException, tb: object) -> None:
    raise ValueError("the hook fails too")


@atexit.register
def post_mortem() -> None:
    print("sys.last_value at exit:", repr(getattr(sys, "last_value", None)))


sys.excepthook = broken_hook
seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(3)):
    train_step(model, opt, x, y, step)
raise LookupError("the job's own error")
