"""PyTorch's speech-command tutorial sets its GPU loader options under `if device == "cuda":`, with `device` a
torch.device: never equal to a string, so the GPU branch never runs (num_workers stays 0, no pinned memory)."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if device == "cuda":  # MARK device-compared-to-string
    num_workers, pin_memory = 1, True
else:
    num_workers, pin_memory = 0, False
plain = "cuda" if torch.cuda.is_available() else "cpu"
if plain == "cuda":  # a string compared with a string: right as it is
    pass
data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
loader = DataLoader(data, batch_size=8, num_workers=num_workers, pin_memory=pin_memory)
model = nn.Linear(8, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    x, y = x.to(device), y.to(device)  # noqa: PLW2901
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
