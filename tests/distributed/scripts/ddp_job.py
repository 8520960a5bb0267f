"""A tiny DDP training job on CPU (gloo). Flags pick the mistake: --no-sampler, --slow-rank R, --crash-rank R,
--hang-at STEP (write its pid into $JOB_READY_FILE.RANK, then wait to be stopped), --block-at STEP (the same, but
rank 0 waits inside a collective, in C++, where no Python signal handler can run, for rank 1, which ignores SIGTERM
and never comes: torchrun SIGKILLs it after its grace period)."""

import argparse
import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Points(Dataset):
    def __init__(self, n: int, delay_s: float) -> None:
        self.x = torch.randn(n, 8)
        self.y = torch.randn(n, 1)
        self.delay_s = delay_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        if self.delay_s:
            time.sleep(self.delay_s)  # a slow decode on this rank only
        return self.x[i], self.y[i]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-sampler", action="store_true")
    parser.add_argument("--slow-rank", type=int, default=-1)
    parser.add_argument("--crash-rank", type=int, default=-1)
    parser.add_argument("--hang-at", type=int, default=-1)
    parser.add_argument("--block-at", type=int, default=-1)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    dataset = Points(64, delay_s=0.02 if rank == args.slow_rank else 0.0)
    sampler = None if args.no_sampler else DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler, shuffle=args.no_sampler)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, (x, y) in enumerate(loader):
        if step == args.steps:
            break
        if rank == args.crash_rank and step == 2:
            raise RuntimeError(f"rank {rank} hit a corrupt batch at step {step}")
        if step in (args.hang_at, args.block_at):
            Path(f"{os.environ['JOB_READY_FILE']}.{rank}").write_text(str(os.getpid()))
            if step == args.block_at and rank == 0:
                dist.barrier()  # rank 1 never joins: rank 0 waits in gloo, in C++
            if step == args.block_at and rank == 1:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(600)  # a job that never ends, until torchrun stops it
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    dist.destroy_process_group()
    weights = [round(p.sum().item(), 6) for p in model.parameters()]
    # One write per line: two ranks share the launcher's stdout, and print() may split a line into several writes.
    os.write(1, f"rank {rank} done {os.environ['WORLD_SIZE']}\nrank {rank} weights {weights}\n".encode())


if __name__ == "__main__":
    main()
