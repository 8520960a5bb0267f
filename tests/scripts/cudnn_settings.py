"""pytorch/examples fast_neural_style sets `torch.backends.cudnn.deterministic = True` (and benchmark off) for its
whole training: every convolution is held to deterministic algorithms. `--variable` feeds a new image size every step
with the autotuner on (torchvision's detection references warn against it); `--default` leaves both flags alone."""

import argparse
import os

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--variable", action="store_true")
parser.add_argument("--default", action="store_true")
args = parser.parse_args()
device = torch.device(os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu"))
if args.variable:
    torch.backends.cudnn.benchmark = True  # MARK cudnn-benchmark-on
elif not args.default:
    torch.backends.cudnn.deterministic = True  # MARK cudnn-deterministic
    torch.backends.cudnn.benchmark = False

net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1)).to(device)
optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
for step in range(12):
    size = 16 + 4 * step if args.variable else 16
    images = torch.rand(2, 3, size, size, device=device)
    loss = (net(images) - images).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
