"""A graceful stop on SIGTERM, as Lightning's signal connector and submitit do it: the handler keeps the previous
one and chains to it when it is a function, sets a flag, and the loop saves a checkpoint and exits 0. Under plain
Python the previous handler is SIG_DFL, which nobody calls; gputriage's own must not end the job when chained to."""

import os
import signal
import sys

import torch
from common import Net, batches, seeded, train_step

stop = {"flag": False}
previous = signal.getsignal(signal.SIGTERM)


def on_term(signum, frame):
    stop["flag"] = True
    if callable(previous):
        previous(signum, frame)


signal.signal(signal.SIGTERM, on_term)
seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(8)):
    train_step(model, opt, x, y, step)
    if step == 3:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGTERM)
    if stop["flag"]:
        torch.save(model.state_dict(), "preempted.pt")
        print(f"stopped at step {step}, checkpoint saved")
        break
sys.exit(0)
