"""Save a full checkpoint mid-run, load it into a fresh model and optimizer, and go on from it."""

import torch
from common import Net, batches, seeded, train_step

seeded()
model = Net()
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
data = list(batches(10))
for step, (x, y) in enumerate(data[:5]):
    train_step(model, opt, x, y, step)
torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": 5}, "ckpt.pt")
ckpt = torch.load("ckpt.pt")
model2 = Net()
model2.load_state_dict(ckpt["model"])
opt2 = torch.optim.AdamW(model2.parameters(), lr=1e-2)
opt2.load_state_dict(ckpt["opt"])
for step, (x, y) in enumerate(data[5:], start=ckpt["step"]):
    train_step(model2, opt2, x, y, step)
torch.save(model2.state_dict(), "final.pt")
