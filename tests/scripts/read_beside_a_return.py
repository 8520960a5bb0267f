"""pyGAT's train(epoch) (a trial): a per-epoch print of two device values, then `return loss_val.item()` for the
early stopping, every step. Gating the print alone saves no wait (the return reads right after it) and cuts the
job's own log: no edit, and the fix says why."""

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(8, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 8, device=device), torch.randn(64, 1, device=device)


def train(epoch):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    loss_val = nn.functional.mse_loss(model(x), y)
    print("epoch", epoch, f"loss {loss.item():.4f}", f"val {loss_val.item():.4f}")  # MARK print
    return loss_val.item()


best = float("inf")
for epoch in range(12):
    best = min(best, train(epoch))
print("done")
