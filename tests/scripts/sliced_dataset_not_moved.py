"""locuslab/TCN's copy-memory task (a trial): the whole dataset is a module global, moved in an `if args.cuda:` block
that forgot `train_x`; train() slices a batch of it each step. The fix is the dataset's move, once, in that block,
not a copy of every slice inside the step."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--no-cuda", action="store_true")
args = parser.parse_args()
args.cuda = not args.no_cuda and torch.cuda.is_available()

train_x, train_y = torch.randn(96, 8), torch.randint(0, 3, (96,))
model = nn.Linear(8, 3)
if args.cuda:
    model.cuda()
    train_y = train_y.cuda()  # MARK last-move


def train() -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for start in range(0, 96, 8):
        x = train_x[start : start + 8]
        y = train_y[start : start + 8]
        out = model(x.contiguous())  # MARK data-on-cpu
        loss = nn.functional.cross_entropy(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


train()
print("done")
