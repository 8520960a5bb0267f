"""PyTorch's char-RNN tutorial ported to CUDA with `device=` forgotten in the model's `initHidden`: the hidden state
comes from a method of the model, is made on the CPU there, and meets the device's weights inside forward."""

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class RNN(nn.Module):
    def __init__(self, n_in, n_hidden, n_out):
        super().__init__()
        self.hidden_size = n_hidden
        self.i2h = nn.Linear(n_in, n_hidden)
        self.h2h = nn.Linear(n_hidden, n_hidden)
        self.h2o = nn.Linear(n_hidden, n_out)

    def forward(self, x, hidden):
        hidden = torch.tanh(self.i2h(x) + self.h2h(hidden))
        return self.h2o(hidden), hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)  # MARK made-on-cpu


rnn = RNN(8, 16, 4).to(device)
opt = torch.optim.SGD(rnn.parameters(), lr=0.1)


def train(line):
    hidden = rnn.initHidden()
    for i in range(line.size(0)):
        output, hidden = rnn(line[i], hidden)
    loss = output.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()


for _ in range(5):
    train(torch.randn(3, 1, 8, device=device))
