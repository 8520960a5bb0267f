"""DataLoader workers started by fork or by spawn, seeded, with a per-sample transform."""

import sys

import torch
from common import Net, seeded, train_step
from torch.utils.data import DataLoader, Dataset


class Noisy(Dataset):
    def __len__(self) -> int:
        return 48

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        return torch.randn(8, generator=g), i % 4


if __name__ == "__main__":
    seeded()
    loader = DataLoader(Noisy(), batch_size=8, num_workers=2, multiprocessing_context=sys.argv[1])
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for step, (x, y) in enumerate(loader):
            train_step(model, opt, x, y, epoch * 10 + step)
    torch.save(model.state_dict(), "workers.pt")
