"""An EMA copy of the model updated every step, and a best-model snapshot, as timm and Lightning jobs keep them."""

import copy

import torch
from common import Net, batches, seeded, train_step

seeded()
model = Net()
ema = copy.deepcopy(model).eval()
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
best, best_loss = None, float("inf")
for step, (x, y) in enumerate(batches(8)):
    loss = train_step(model, opt, x, y, step)
    with torch.no_grad():
        for e, p in zip(ema.parameters(), model.parameters(), strict=True):
            e.mul_(0.9).add_(p, alpha=0.1)
    if loss < best_loss:
        best, best_loss = copy.deepcopy(model), loss
    print("ema", round(float(ema(x).sum()), 5))
torch.save({"ema": ema.state_dict(), "best": best.state_dict()}, "ema.pt")
torch.save(ema, "ema_model.pt")
