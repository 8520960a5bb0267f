"""A language-model loop as pytorch/examples' word_language_model writes it: batches sliced from one tensor (no
DataLoader), a hand-written SGD update (no optimizer), the best model saved and reloaded at the end, and the loss
read with .item() every step."""

import tempfile
from pathlib import Path

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
data = torch.randint(0, 50, (300, 8), device=device)
model = nn.Sequential(nn.Embedding(50, 32), nn.Linear(32, 50)).to(device)
criterion = nn.CrossEntropyLoss()
lr = 0.5
total_loss = 0.0
for i in range(0, data.size(0) - 6, 5):
    inputs, targets = data[i : i + 5], data[i + 1 : i + 6]
    model.zero_grad()
    output = model(inputs)
    loss = criterion(output.view(-1, 50), targets.reshape(-1))
    loss.backward()
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
    total_loss += loss.item()  # MARK host-sync-in-loop
    print(f"batch {i // 5} loss {loss.item():.3f}")
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "model.pt"
    with path.open("wb") as f:
        torch.save(model, f)
    with path.open("rb") as f:
        model = torch.load(f, weights_only=False)  # no map_location: back on the device it was saved from
loss = criterion(model(data[:5]).view(-1, 50), data[1:6].reshape(-1))
print("reloaded on", next(model.parameters()).device, "loss", round(loss.item(), 3))
