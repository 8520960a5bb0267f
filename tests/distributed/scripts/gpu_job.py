"""A tiny DDP job on GPUs. --cuda0: every rank on cuda:0 (no set_device); --gloo: gloo for CUDA tensors;
--checkpoint: every rank loads a checkpoint saved from cuda:0 without map_location."""

import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda0", action="store_true")
    parser.add_argument("--gloo", action="store_true")
    parser.add_argument("--checkpoint", type=Path)
    args = parser.parse_args()

    local_rank = int(os.environ["LOCAL_RANK"])
    if args.cuda0:
        device = torch.device("cuda")  # the classic: cuda means cuda:0 on every rank
    else:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    dist.init_process_group("gloo" if args.gloo else "nccl")
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1)).to(device)
    if args.checkpoint is not None:
        if dist.get_rank() == 0:
            torch.save({"w": torch.randn(64, 1024, 1024, device="cuda:0")}, args.checkpoint)
        dist.barrier()
        state = torch.load(args.checkpoint)  # lands on cuda:0, whichever rank loads it
        del state
    ddp = DistributedDataParallel(model, device_ids=[device.index or 0])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    for _ in range(6):
        opt.zero_grad()
        ddp(torch.randn(64, 256, device=device)).sum().backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
