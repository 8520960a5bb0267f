"""TCN's shape (a trial): the loss computed on the CPU, both operands moved there with `.cpu()`. Moving one back
(the labels) leaves the other on the CPU, and the patched job fails on a GPU: the fix drops both `.cpu()`."""

import torch
from torch import nn
from torch.nn.utils import weight_norm

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# weight_norm's `weight` is a plain attribute recomputed on the parameters' device at each forward: not left behind
model = nn.Sequential(weight_norm(nn.Linear(16, 16)), nn.ReLU(), nn.Linear(16, 4)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()
for _step in range(12):
    x = torch.randn(32, 16, device=device)
    y = torch.randint(0, 4, (32,), device=device)
    out = model(x)
    loss = criterion(out.cpu(), y.cpu())  # MARK data-on-cpu
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("done")
