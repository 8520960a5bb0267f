"""A loss built with class weights made on the CPU (a seq2seq tutorial's `nn.CrossEntropyLoss(weight=...)`): the model
and the batch are on the device, the loss's buffer is not, and the first loss dies."""

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 5)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss(weight=torch.ones(5), ignore_index=0)  # MARK device-mismatch-error
for _ in range(5):
    x = torch.randn(16, 8, device=device)
    y = torch.randint(0, 5, (16,), device=device)
    loss = criterion(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done", float(loss))
