"""A GCN-style full-batch step (pytorch/examples gcn): the node labels are loaded on the CPU and never moved, while
the training mask is made on the device; `target[mask]` indexes a host tensor with device indices: CUDA refuses."""

import os

import torch
from torch import nn

device = torch.device(os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu"))
features = torch.randn(50, 8).to(device)
target = torch.randint(0, 3, (50,))  # MARK labels-on-cpu
mask = (torch.arange(50) < 30).to(device)
model = nn.Linear(8, 3).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train_step(features, target, mask):
    optimizer.zero_grad()
    output = model(features)
    loss = nn.functional.cross_entropy(output[mask], target[mask])  # MARK crash
    loss.backward()
    optimizer.step()


for _ in range(5):
    train_step(features, target, mask)
