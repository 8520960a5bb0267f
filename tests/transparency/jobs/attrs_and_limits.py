"""A job's objects and settings that gputriage must not touch: a Dataset whose `__getattr__` looks unknown names up
in a dict (EasyDict style: a missing one raises KeyError, and every name it is asked for is logged), and a recursion
limit the job sets itself, with a recursion that fits under it under python. A trial: the probe's read of
`dataset.transform` raised KeyError into the job's loop, and the job's own limit lost gputriage's 15 frames below the
script (RecursionError); both exit 0 under python, 1 under gputriage."""

import sys

import torch
from common import Net, seeded, train_step
from torch.utils.data import DataLoader, Dataset

asked = []


class Configured(Dataset):
    def __init__(self):
        self.cfg = {"n": 24}

    def __len__(self):
        return self.cfg["n"]

    def __getitem__(self, i):
        return torch.full((8,), float(i)), torch.tensor(i % 4)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        asked.append(name)
        return self.__dict__["cfg"][name]


def depth(n):
    return 0 if n == 0 else 1 + depth(n - 1)


seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
step = 0
for _ in range(2):
    for x, y in DataLoader(Configured(), batch_size=4):
        train_step(model, opt, x, y, step)
        step += 1
print("asked:", asked)
sys.setrecursionlimit(150)
print("depth:", depth(130), "limit:", sys.getrecursionlimit() > 0)
