"""pytorch/examples' older MNIST idiom: no device variable, an `args.cuda` switch over `.cuda()` moves. The model is
moved under the switch; the batch, taken from two parallel arrays at one index, is not. The fix must keep the
script's switch (a bare `.cuda()` or `torch.device("cuda")` breaks its `--no-cuda` runs) and move both parts of the
batch in one round (the model's call dies before the loss shows the labels)."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--no-cuda", action="store_true", default=False)
parser.add_argument("--steps", type=int, default=8)
args = parser.parse_args()
args.cuda = not args.no_cuda and torch.cuda.is_available()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x.view(-1, 784)))), dim=1)


model = Net()
if args.cuda:
    model.cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data_all = torch.randn(args.steps, 16, 1, 28, 28)
target_all = torch.randint(0, 10, (args.steps, 16))


def train():
    model.train()
    for batch_idx in range(args.steps):
        data, target = data_all[batch_idx], target_all[batch_idx]
        optimizer.zero_grad()
        output = model(data)  # MARK data-on-cpu
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()


train()
