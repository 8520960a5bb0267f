"""pytorch/examples' MNIST shape with the batch moved nowhere: `train()` and `test()` each feed the model an unmoved
batch from their own loader. The model is on the device, so the training step dies first; a fix (and its patch)
that moves the batch in `train()` alone leaves `test()` dying at the end of the first epoch on a GPU (trial 8)."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x.view(-1, 784)))), dim=1)


def train(model, device, train_loader, optimizer):
    model.train()
    for data, target in train_loader:
        optimizer.zero_grad()
        output = model(data)  # MARK data-on-cpu
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()


def test(model, device, test_loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data)  # MARK test-call
            correct += output.argmax(dim=1).eq(target).sum()
    print(f"test: {int(correct)} right")


def main():
    data = TensorDataset(torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,)))
    train_loader = DataLoader(data, batch_size=16)
    test_loader = DataLoader(data, batch_size=32)
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    train(model, device, train_loader, optimizer)
    test(model, device, test_loader)


if __name__ == "__main__":
    main()
