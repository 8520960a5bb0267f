"""A contrastive loss as sthalles/SimCLR writes it: the negatives picked with a boolean mask every step. On CUDA,
`x[mask]` has a data-dependent shape, so the host waits for the device to count the mask before it goes on."""

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(16, 16).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(20):
    z = model(torch.randn(8, 16, device=device))
    sim = z @ z.T
    mask = torch.eye(8, dtype=torch.bool, device=device)
    negatives = sim[~mask].view(8, -1)  # MARK host-sync-in-loop
    loss = negatives.logsumexp(dim=1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
