"""imagenette-ddp's accelerate loop (a trial): the batch is indexed in the calls (`data[0]`, `data[1]`) and never
moved. Moving `data[0]` alone, where it crashed, leaves `data[1]` to crash on the next line: the whole batch moves."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train_fn(model, loader, optimizer, device):
    for _t, data in enumerate(loader):
        optimizer.zero_grad()
        out = model(data[0])  # MARK data-on-cpu
        loss = nn.CrossEntropyLoss()(out, data[1])
        loss.backward()
        optimizer.step()


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(8, 3).to(device)
data = TensorDataset(torch.randn(96, 8), torch.randint(0, 3, (96,)))
train_fn(model, DataLoader(data, batch_size=8), torch.optim.SGD(model.parameters(), lr=0.1), device)
print("done")
