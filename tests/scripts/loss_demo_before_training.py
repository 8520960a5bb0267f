"""PyTorch's "Training with PyTorch" tutorial: before training, the loss is shown on made-up numbers, all on the CPU
(`loss_fn(dummy_outputs, dummy_labels)`); the training itself is on the device. `--outputs-cpu` computes the
training loss on the model's output brought back to the CPU, with the labels left there (a real mistake)."""

import sys

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
loss_fn = nn.CrossEntropyLoss()
dummy_outputs = torch.rand(4, 10)
dummy_labels = torch.tensor([1, 5, 3, 7])
print("demo loss", float(loss_fn(dummy_outputs, dummy_labels)))

model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(12):
    x = torch.randn(8, 16).to(device)
    y = torch.randint(0, 10, (8,))
    if "--outputs-cpu" in sys.argv:  # noqa: SIM108  (each branch its own line, marked)
        loss = loss_fn(model(x).cpu(), y)  # MARK data-on-cpu
    else:
        loss = loss_fn(model(x), y.to(device))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
