"""pyGAT's shape (a trial): full-batch tensors kept as module globals, moved in an `if args.cuda:` block that forgot
one of them; `train()` reads the globals. A move inserted inside `train()` would make the name local there and the
function would fail at once (UnboundLocalError): the move goes in the block, beside the others."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--no-cuda", action="store_true", default=False)
args = parser.parse_args()
args.cuda = not args.no_cuda and torch.cuda.is_available()

features = torch.randn(64, 16)
labels = torch.randint(0, 4, (64,))
model = nn.Linear(16, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
if args.cuda:
    model.cuda()
    labels = labels.cuda()  # MARK last-move


def train() -> None:
    optimizer.zero_grad()
    output = model(features)  # MARK data-on-cpu
    loss = nn.functional.cross_entropy(output, labels)
    loss.backward()
    optimizer.step()


for _epoch in range(12):
    train()
print("done")
