"""Mixed precision as the PyTorch AMP recipe writes it: autocast and a GradScaler. GradScaler.step reads `found_inf`
on the host once per step by design; the loop itself reads nothing."""

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.001)
scaler = torch.amp.GradScaler(device)
for _ in range(30):
    x, y = torch.randn(32, 64, device=device), torch.randn(32, 64, device=device)
    with torch.autocast(device_type=device, dtype=torch.float16):
        loss = nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
print("done")
