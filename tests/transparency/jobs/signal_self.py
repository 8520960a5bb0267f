"""The job receives a signal at step 3 (SIGTERM: it dies where it stands, no `finally` runs; SIGINT: a
KeyboardInterrupt, the atexit handlers run, then it dies of SIGINT)."""

import atexit
import os
import signal
import sys

import torch
from common import Net, batches, seeded, train_step

which = getattr(signal, sys.argv[1])
atexit.register(lambda: open("atexit.txt", "w").write("ran\n"))
seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
log = open("log.txt", "w")
try:
    for step, (x, y) in enumerate(batches(8)):
        log.write(f"{train_step(model, opt, x, y, step)}\n")
        if step == 3:
            sys.stdout.flush()
            os.kill(os.getpid(), which)
finally:
    open("finally.txt", "w").write("ran\n")
