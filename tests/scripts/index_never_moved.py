"""A full-batch graph model (tkipf/pygcn's train.py): the script moves its tensors in an `if args.cuda:` block and
leaves the train index out, so every step indexes device tensors with a CPU index."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--no-cuda", action="store_true")
args = parser.parse_args()
args.cuda = not args.no_cuda and torch.cuda.is_available()

features, labels = torch.randn(200, 16), torch.randint(0, 4, (200,))
idx_train, idx_val = torch.arange(0, 120), torch.arange(120, 200)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

if args.cuda:
    model.cuda()
    features = features.cuda()
    labels = labels.cuda()
    idx_val = idx_val.cuda()


def train(epoch):
    optimizer.zero_grad()
    output = F.log_softmax(model(features), dim=1)
    loss_train = F.nll_loss(output[idx_train], labels[idx_train])  # MARK cpu-index
    loss_train.backward()
    optimizer.step()
    return loss_train.detach()


for epoch in range(30):
    last = train(epoch)
print("done", float(last))
