"""pytorch/examples' GCN shape: the whole graph is made once, before the loop, and given to the model at every
epoch; the features come from the script's own loader function, the mask from a factory, neither on the device. The
fix belongs where each is made (moved once; the factory given `device=`), not before the call, where it would copy
the whole graph to the device at every step (trial 8)."""

import torch
import torch.nn.functional as F
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def load_graph(nodes):
    features = torch.randn(nodes, 16)
    labels = torch.randint(0, 4, (nodes,))
    return features, labels


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x, mask):
        return F.log_softmax(self.fc(x) * mask, dim=1)


def main():
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    features, labels = load_graph(64)  # MARK made
    labels = labels.to(device)
    mask = torch.ones(64, 1)  # MARK mask-made
    for _epoch in range(4):
        optimizer.zero_grad()
        output = model(features, mask)  # MARK call
        loss = F.nll_loss(output, labels)
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
