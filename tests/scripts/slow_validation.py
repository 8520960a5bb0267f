"""A fast training loader and a validation loader whose __getitem__ sleeps (a file read, a decode), run under no_grad
after every epoch with no workers: the GPU idles through each validation pass."""

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset


class SlowVal(Dataset):
    def __init__(self):
        self.x, self.y = torch.randn(96, 32), torch.randint(0, 4, (96,))

    def __len__(self):
        return 96

    def __getitem__(self, i):
        time.sleep(0.003)
        return self.x[i], self.y[i]


torch.manual_seed(0)
train = DataLoader(TensorDataset(torch.randn(320, 32), torch.randint(0, 4, (320,))), batch_size=32)
val = DataLoader(SlowVal(), batch_size=32)  # MARK eval-loader-bound
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(4):
    for x, y in train:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        correct = sum(int((model(x).argmax(1) == y).sum()) for x, y in val)
    print("epoch", epoch, correct)
