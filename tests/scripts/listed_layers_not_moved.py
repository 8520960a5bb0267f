"""Layers kept in a plain list and never moved, each run as `layer.forward(x)` (pytorch/examples'
mnist_forward_forward without its `.to(device)`): no hook sees a model; the crash's CPU operand is a layer's own
weight, seen through `self.weight.T`."""

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Layer(nn.Linear):
    def forward(self, x):
        return torch.relu(torch.mm(x, self.weight.T) + self.bias.unsqueeze(0))


class Net(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.layers = []
        for d in range(len(dims) - 1):
            self.layers = self.layers + [Layer(dims[d], dims[d + 1])]  # noqa: RUF005  # MARK model-on-cpu

    def run(self, x):
        for layer in self.layers:
            x = layer.forward(x)
        return x


net = Net([8, 16, 4])
x = torch.randn(32, 8).to(device)
for _ in range(3):
    out = net.run(x)
print("done", out.shape)
