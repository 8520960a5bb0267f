"""A recommender's loop (NCF) that moves the batch's tensors one by one with `.cuda()` and drops the label's move:
the loss dies mixing devices."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

users, items = torch.randint(0, 50, (256,)), torch.randint(0, 80, (256,))
labels = torch.randint(0, 2, (256,)).float()
loader = DataLoader(TensorDataset(users, items, labels), batch_size=32)


class NCF(nn.Module):
    def __init__(self):
        super().__init__()
        self.u, self.i = nn.Embedding(50, 8), nn.Embedding(80, 8)

    def forward(self, user, item):
        return (self.u(user) * self.i(item)).sum(-1)


model = NCF().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_function = nn.BCEWithLogitsLoss()
for _ in range(2):
    for user, item, label in loader:
        user = user.cuda()  # noqa: PLW2901  # the script's own idiom, as found
        item = item.cuda()  # noqa: PLW2901
        label = label.float()  # noqa: PLW2901
        prediction = model(user, item)
        loss = loss_function(prediction, label)  # MARK data-on-cpu
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
print("done")
