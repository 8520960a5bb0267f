"""karpathy/llama2.c's shape: the training job evaluates first (estimate_loss() under @torch.no_grad(), at iteration
0), over a DataLoader with one `.item()` per batch, then trains without reading any device value. The evaluation's
batches are not training steps: counted as such, the preflight ended inside the evaluation and called its once-only
reads a sync every step. `--peek` takes one batch to look at before the loop (`sample = next(iter(loader))`), which
is not a step either."""

import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = TensorDataset(torch.randn(1024, 32), torch.randint(0, 4, (1024,)))


@torch.no_grad()
def estimate_loss() -> float:
    model.eval()
    total = 0.0
    for x, y in DataLoader(data, batch_size=32):
        total += nn.functional.cross_entropy(model(x.to(device)), y.to(device)).item()
    model.train()
    return total / 32


loader = DataLoader(data, batch_size=32, shuffle=True)
if "--peek" in sys.argv:
    sample, _ = next(iter(loader))
    print("batch shape", tuple(sample.shape))
print("val loss", round(estimate_loss(), 3))
for step, (x, y) in enumerate(loader):
    loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 2:
        print("training")
