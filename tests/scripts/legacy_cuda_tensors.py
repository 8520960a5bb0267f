"""eriklindernoren/PyTorch-GAN's idiom: `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`, then every
tensor is built with the legacy class (`Tensor(n, 1).fill_(1.0)`, `imgs.type(Tensor)`, `Tensor(np_array)`). A healthy
script: under the preflight it must run as on a GPU machine, not die on torch's "type torch.cuda.FloatTensor not
available"."""

import numpy as np
import torch
from torch import nn

cuda = torch.cuda.is_available()
Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
generator = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
discriminator = nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())
if cuda:
    generator.cuda()
    discriminator.cuda()
loss_fn = nn.BCELoss()
opt = torch.optim.Adam([*generator.parameters(), *discriminator.parameters()], lr=1e-3)
for step in range(12):
    imgs = torch.randn(16, 4)
    valid = Tensor(imgs.size(0), 1).fill_(1.0)
    real = imgs.type(Tensor)
    z = Tensor(np.random.normal(0, 1, (imgs.shape[0], 8)))
    assert isinstance(real, Tensor) and isinstance(z, Tensor)
    loss = loss_fn(discriminator(generator(z)), valid) + loss_fn(discriminator(real), valid)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 0:
        print("built on", valid.device, real.device, z.device)
