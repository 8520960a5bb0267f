"""A DDP job on gloo, run by torchrun: seeded, rank 0 saves the model."""

import os

import torch
import torch.distributed as dist
from common import Net, batches, seeded
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
rank = dist.get_rank()
seeded()
model = DistributedDataParallel(Net())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(5)):
    loss = torch.nn.functional.cross_entropy(model(x[rank::2]), y[rank::2])
    opt.zero_grad()
    loss.backward()
    opt.step()
    os.write(1, f"rank {rank} step {step} loss {loss.item():.6f}\n".encode())
if rank == 0:
    torch.save(model.module.state_dict(), "ddp.pt")
dist.destroy_process_group()
