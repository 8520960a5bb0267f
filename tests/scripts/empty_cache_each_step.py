"""torch.cuda.empty_cache() after every optimizer step (PPO-PyTorch, trial 10): the cached blocks go back to the driver
and the next step allocates them again. The patched script kept it and was judged HEALTHY."""

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(8, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(20):
    x = torch.randn(16, 8, device=device)
    loss = model(x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    torch.cuda.empty_cache()  # MARK empty
print("done")
