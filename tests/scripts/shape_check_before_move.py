"""d2l's LeNet chapter: the net runs layer by layer on the CPU to print its shapes, the output kept alive, then it is
moved with `net.to(device)` and trained; milesial's UNet moves its model with `model.to(device=device)` and its Dice
loss one-hot encodes the labels on the device. A healthy control: a user trial saw a crash on the move (a live graph
stopped the stand-in's swap), six false criticals for the shape check, and a false model-on-cpu for the keyword."""

import os

import torch
import torch.nn.functional as F
from torch import nn

net = nn.Sequential(
    nn.Conv2d(1, 6, kernel_size=5, padding=2), nn.Sigmoid(), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(6 * 14 * 14, 3)
)
X = torch.rand(size=(1, 1, 28, 28), dtype=torch.float32)
for layer in net:
    X = layer(X)
    print(layer.__class__.__name__, "output shape:", tuple(X.shape))

device = torch.device(os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu"))
net.to(device=device)
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(15):
    images = torch.rand(8, 1, 28, 28, device=device)
    labels = torch.randint(0, 3, (8,), device=device)
    logits = net(images)
    dice = 1 - (logits.softmax(1) * F.one_hot(labels, 3)).sum() / labels.numel()
    loss = F.cross_entropy(logits, labels) + dice
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("trained on", next(net.parameters()).device)
