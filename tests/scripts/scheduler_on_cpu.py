"""A diffusion noise schedule kept by a plain object (tanelp/tiny-diffusion's NoiseScheduler on CUDA): no .to()
reaches its tensors, and indexing them with timesteps on the device dies."""

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class NoiseScheduler:
    def __init__(self, steps=50):
        self.betas = torch.linspace(1e-4, 0.02, steps)
        self.alphas = 1.0 - self.betas
        self.alphas_cumprod = torch.cumprod(self.alphas, 0)
        self.sqrt_alphas_cumprod = self.alphas_cumprod**0.5

    def add_noise(self, x, noise, t):
        s = self.sqrt_alphas_cumprod[t].reshape(-1, 1)
        return s * x + noise


model = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
scheduler = NoiseScheduler(  # MARK device-mismatch-error
    steps=50,
)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(8):  # enough steps after warm-up for rung 5 to judge
    x = torch.randn(16, 2, device=device)
    noise = torch.randn_like(x)
    t = torch.randint(0, 50, (16,), device=device)
    loss = ((model(scheduler.add_noise(x, noise, t)) - noise) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done", float(loss))
