"""pytorch/examples language_translation's shape: the device comes from a flag whose default is the CPU, so every
.to(DEVICE) sends the model and the batches to the CPU. The fix is the flag, not one more .to()."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--backend", default="cpu", choices=["cpu", "gpu"])
args = parser.parse_args()
DEVICE = torch.device("cuda" if args.backend == "gpu" and torch.cuda.is_available() else "cpu")  # MARK data-on-cpu

model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(DEVICE)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(20):
    x, y = torch.randn(8, 16).to(DEVICE), torch.randint(0, 4, (8,)).to(DEVICE)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done on", DEVICE)
