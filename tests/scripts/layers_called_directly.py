"""pytorch/examples mnist_forward_forward's shape: the network keeps its layers in a plain Python list and trains each
layer by calling its forward directly (`self.forward(x)` inside the layer's own loop), so no model is ever called as a
whole. `net.to(device)` moves nothing (the list is invisible to it), and the first layer crashes on the GPU with its
weight still on the CPU. The cause is the list: nn.ModuleList registers the layers."""

import argparse
import os

import torch
from torch import nn


class Layer(nn.Linear):
    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__(n_in, n_out)
        self.opt = torch.optim.SGD(self.parameters(), lr=0.05)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.mm(x, self.weight.T) + self.bias.unsqueeze(0))

    def train_layer(self, x: torch.Tensor, steps: int) -> torch.Tensor:
        for _ in range(steps):
            loss = self.forward(x).pow(2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        return self.forward(x).detach()


class Net(nn.Module):
    def __init__(self, dims: list[int]) -> None:
        super().__init__()
        self.layers = []
        for d in range(len(dims) - 1):
            self.layers = self.layers + [Layer(dims[d], dims[d + 1])]  # noqa: RUF005  # MARK model-partly-on-cpu

    def train_layers(self, x: torch.Tensor, steps: int) -> None:
        h = x
        for layer in self.layers:
            h = layer.train_layer(h, steps)


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=30)
args = parser.parse_args()
device = torch.device(
    os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
)  # written for CUDA; the tests pin meta
net = Net([64, 32, 32]).to(device)
x = torch.randn(128, 64).to(device)
net.train_layers(x, args.steps)
print("trained", len(net.layers), "layers")
