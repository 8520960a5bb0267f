"""A diffusion model that keeps its noise schedule with `setattr(self, k, v)` in a loop (minDiffusion's DDPM uses
register_buffer there): model.to(device) leaves the schedule on the CPU, and indexing it with device timesteps dies."""

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def schedules(steps):
    beta_t = torch.linspace(1e-4, 0.02, steps + 1)
    alphabar_t = torch.cumprod(1 - beta_t, dim=0)
    return {"sqrtab": alphabar_t.sqrt(), "sqrtmab": (1 - alphabar_t).sqrt()}


class DDPM(nn.Module):
    def __init__(self, steps=50):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 2))
        for k, v in schedules(steps).items():
            setattr(self, k, v)  # MARK model-partly-on-cpu
        self.steps = steps

    def forward(self, x):
        t = torch.randint(1, self.steps + 1, (x.shape[0],), device=x.device)
        noise = torch.randn_like(x)
        x_t = self.sqrtab[t, None] * x + self.sqrtmab[t, None] * noise
        return ((self.net(x_t) - noise) ** 2).mean()


model = DDPM().to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(5):
    loss = model(torch.randn(16, 2, device=device))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done", float(loss))
