"""The job's atexit handler pickles a model whose class the script defines (it must still be found in __main__),
and a non-daemon thread finishes after the main script."""

import atexit
import pickle
import threading
import time

import torch
from common import batches, seeded, train_step
from torch import nn


class Local(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


seeded()
model = Local()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(3)):
    train_step(model, opt, x, y, step)


def save() -> None:
    torch.save(model, "atexit_model.pt")  # pickles the class by its name in __main__
    back = pickle.loads(pickle.dumps(model))
    print("saved at exit", type(model).__module__, type(back).__name__)


def late() -> None:
    time.sleep(0.3)
    with open("thread.txt", "w") as f:
        f.write(f"{float(model.fc.bias.sum()):.5f}\n")


atexit.register(save)
threading.Thread(target=late).start()
print("main done")
