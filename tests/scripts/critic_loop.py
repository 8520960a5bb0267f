"""A WGAN-style loop: several critic optimizer steps per DataLoader batch, one generator step, and the losses read
on the host once per batch (the per-batch `.item()` a census of critic steps alone never saw)."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = "cuda" if torch.cuda.is_available() else "cpu"
CRITIC_ITERATIONS = 5

critic = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
gen = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 32)).to(device)
opt_critic = torch.optim.Adam(critic.parameters(), lr=1e-4)
opt_gen = torch.optim.Adam(gen.parameters(), lr=1e-4)
loader = DataLoader(TensorDataset(torch.randn(640, 32)), batch_size=32)

for _epoch in range(2):  # 20 batches of 5 critic steps each
    for (batch,) in loader:
        real = batch.to(device)
        for _ in range(CRITIC_ITERATIONS):
            noise = torch.randn(32, 8, device=device)
            fake = gen(noise)
            loss_critic = -(critic(real).mean() - critic(fake.detach()).mean())
            opt_critic.zero_grad()
            loss_critic.backward()
            opt_critic.step()
        loss_gen = -critic(gen(torch.randn(32, 8, device=device))).mean()
        opt_gen.zero_grad()
        loss_gen.backward()
        opt_gen.step()
        lc, lg = loss_critic.item(), loss_gen.item()  # MARK sync
print("done")
