"""The spatial transformer tutorial's localisation step, healthy: everything on the device. affine_grid's backward
builds its base grid from the gradient's C++ options, which on the preflight's stand-in say "cpu"; the census
counted those ops as CPU work in the step ("82% of the step's time is spent in ops on the CPU"). On a GPU they are
the GPU's."""

import torch
import torch.nn.functional as F

device = "cuda" if torch.cuda.is_available() else "cpu"
loc = torch.nn.Linear(4, 6).to(device)
opt = torch.optim.SGD(loc.parameters(), lr=0.1)
for _ in range(8):
    x = torch.randn(64, 1, 28, 28, device=device)
    theta = loc(torch.randn(64, 4, device=device)).view(-1, 2, 3)
    grid = F.affine_grid(theta, list(x.size()), align_corners=False)
    out = F.grid_sample(x, grid, align_corners=False)
    loss = out.square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
