"""Noise added in the training step with a factory and no device= (a Lightning training_step's
`y_hat + 0.01 * torch.randn(y_hat.shape[0], 1)`, in a plain loop here): the first step dies mixing devices."""

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(5):
    x, y = torch.randn(32, 8, device=device), torch.randn(32, 1, device=device)
    y_hat = model(x)
    y_hat = y_hat + 0.01 * torch.randn(y_hat.shape[0], 1)  # MARK device-mismatch-error
    loss = nn.functional.mse_loss(y_hat, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done", float(loss))
