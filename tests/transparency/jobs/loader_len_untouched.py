"""The DataLoader's dataset and sampler lengths, as the job's own code defines them: an IterableDataset whose `__len__`
raises (a stream with no length), and a sampler and a map-style dataset that log each call. Python's DataLoader calls
neither `__len__` here; gputriage's probe did (the job died of the stream's NotImplementedError, and the logs had
extra calls). The job ends with `sys.exit(not ok)`, a bool, which the report lost (trial 8's P9 and P11)."""

import sys

import torch
from common import Net, seeded, train_step
from torch.utils.data import DataLoader, Dataset, IterableDataset

calls = []


class Stream(IterableDataset):
    def __iter__(self):
        g = torch.Generator().manual_seed(0)
        return iter([(torch.randn(8, generator=g), torch.tensor(i % 4)) for i in range(16)])

    def __len__(self):
        raise NotImplementedError("a stream has no length")


class Logged(Dataset):
    def __len__(self):
        calls.append("dataset-len")
        return 16

    def __getitem__(self, i):
        return torch.full((8,), float(i)), torch.tensor(i % 4)


class Order:
    def __iter__(self):
        calls.append("sampler-iter")
        return iter(range(16))

    def __len__(self):
        calls.append("sampler-len")
        return 16


seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
step = 0
for loader in (DataLoader(Stream(), batch_size=4), DataLoader(Logged(), batch_size=4, sampler=Order())):
    for x, y in loader:
        train_step(model, opt, x, y, step)
        step += 1
print(calls)
ok = False
sys.exit(not ok)
